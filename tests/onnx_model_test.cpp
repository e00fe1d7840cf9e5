// vkg::onnx on models built here with libonnx_proto's classes: results against hand-computed
// values, host-known shapes, and every kind of bad input as a clear vkg::Error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

#include <onnx/onnx_pb.h>

#include <vkgrad/core/jit.hpp>
#include <vkgrad/onnx/model.hpp>
#include <vkgrad/onnx/tensor_proto.hpp>

#include "support/error_of.hpp"

using vkg::test::error_of;

namespace {

using vkg::Tensor;

::onnx::ModelProto model_with(int64_t opset) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_input(::onnx::GraphProto* g, const std::string& name, int32_t type,
               std::vector<int64_t> shape) {
  auto* v = g->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  for (int64_t d : shape) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (d >= 0)
      dim->set_dim_value(d);
    else
      dim->set_dim_param("n");
  }
}
void add_output(::onnx::GraphProto* g, const std::string& name) { g->add_output()->set_name(name); }

::onnx::NodeProto* add_node(::onnx::GraphProto* g, const std::string& op,
                            std::vector<std::string> in, std::vector<std::string> out,
                            const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_0" : name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

std::string bytes_of(const ::onnx::ModelProto& m) { return m.SerializeAsString(); }

// x (2, 3) float -> Relu(x) + bias (an initializer), then reduced over axis 1.
::onnx::ModelProto small_model() {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {-1, 3});
  auto* b = g->add_initializer();
  b->set_name("bias");
  b->set_data_type(::onnx::TensorProto::FLOAT);
  b->add_dims(3);
  for (float v : {1.0f, 2.0f, 3.0f}) b->add_float_data(v);
  auto* axes = g->add_initializer();
  axes->set_name("axes");
  axes->set_data_type(::onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(1);
  add_node(g, "Relu", {"x"}, {"r"});
  add_node(g, "Add", {"r", "bias"}, {"y"});
  auto* red = add_node(g, "ReduceSum", {"y", "axes"}, {"s"});
  auto* keep = red->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(::onnx::AttributeProto::INT);
  keep->set_i(0);
  add_output(g, "y");
  add_output(g, "s");
  return m;
}

TEST(OnnxModel, RunsASmallGraphAgainstHandComputedValues) {
  const auto m = vkg::onnx::Model::from_bytes(bytes_of(small_model()));
  ASSERT_EQ(m.inputs().size(), 1u);  // the initializers are not inputs
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(m.opset(), 13);
  auto out = m.run({{"x", Tensor(std::vector<float>{-1, 2, -3, 4, -5, 6}, {2, 3})}});
  EXPECT_EQ(out.at("y").to_vector<float>(), (std::vector<float>{1, 4, 3, 5, 2, 9}));
  EXPECT_EQ(out.at("s").to_vector<float>(), (std::vector<float>{8, 16}));
  // A free dimension takes any size.
  out = m.run({{"x", Tensor(std::vector<float>{1, 1, 1}, {1, 3})}});
  EXPECT_EQ(out.at("s").to_vector<float>(), (std::vector<float>{9}));
}

TEST(OnnxModel, ShapeComputationsUseHostValuesAndReshape) {
  // y = Reshape(x, Concat(Shape(x)[1:], [-1])): a (2, 3) input becomes (3, 2).
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {2, 3});
  auto* c = add_node(g, "Constant", {}, {"minus1"});
  auto* v = c->add_attribute();
  v->set_name("value_ints");
  v->set_type(::onnx::AttributeProto::INTS);
  v->add_ints(-1);
  add_node(g, "Shape", {"x"}, {"shape"});
  auto* st = add_node(g, "Constant", {}, {"one"});
  auto* sv = st->add_attribute();
  sv->set_name("value_ints");
  sv->set_type(::onnx::AttributeProto::INTS);
  sv->add_ints(1);
  auto* en = add_node(g, "Constant", {}, {"two"}, "Constant_2");
  auto* ev = en->add_attribute();
  ev->set_name("value_ints");
  ev->set_type(::onnx::AttributeProto::INTS);
  ev->add_ints(2);
  add_node(g, "Slice", {"shape", "one", "two"}, {"tail"});
  auto* cat = add_node(g, "Concat", {"tail", "minus1"}, {"target"});
  auto* ax = cat->add_attribute();
  ax->set_name("axis");
  ax->set_type(::onnx::AttributeProto::INT);
  ax->set_i(0);
  add_node(g, "Reshape", {"x", "target"}, {"y"});
  add_output(g, "y");
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(m));
  auto out = model.run({{"x", Tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})}});
  EXPECT_EQ(out.at("y").shape(), (vkg::Shape{3, 2}));
  EXPECT_EQ(out.at("y").to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// y = x[:, :Shape(x)[1] / 2], the shape arithmetic exporters write for attention heads. Its values
// are known on the host, so nothing is read from the device: a Jit capture (where reading is an
// error) succeeds and replays.
TEST(OnnxModel, ShapeArithmeticIsFoldedOnTheHostSoItRunsInAJit) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {2, 4});
  auto int_init = [&](const std::string& name, std::vector<int64_t> v, bool scalar) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(int64_t(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  };
  int_init("one", {1}, true);
  int_init("two", {2}, true);
  int_init("zero1", {0}, false);
  int_init("axis1", {1}, false);
  add_node(g, "Shape", {"x"}, {"s"});
  add_node(g, "Gather", {"s", "one"}, {"n"});
  add_node(g, "Div", {"n", "two"}, {"half"});
  add_node(g, "Unsqueeze", {"half", "zero1"}, {"end"});
  add_node(g, "Slice", {"x", "zero1", "end", "axis1"}, {"y"});
  add_output(g, "y");
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(m));
  vkg::Jit step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{model.run({{"x", in[0]}}).at("y")};
  });
  for (float k : {1.0f, 2.0f, 3.0f}) {
    const auto y = step({Tensor(
        std::vector<float>{k, 2 * k, 3 * k, 4 * k, 5 * k, 6 * k, 7 * k, 8 * k}, {2, 4})})[0];
    EXPECT_EQ(y.shape(), (vkg::Shape{2, 2}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{k, 2 * k, 5 * k, 6 * k}));
  }
}

TEST(OnnxModel, BadFilesAreErrors) {
  EXPECT_NE(error_of([] {
              vkg::onnx::Model::load("/nonexistent/model.onnx");
            }).find("cannot open model file"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              vkg::onnx::Model::from_bytes("this is not a protobuf \xff\xff\xff");
            }).find("not an ONNX model"),
            std::string::npos);
  EXPECT_NE(error_of([] { vkg::onnx::Model::from_bytes(""); }).find("no graph"), std::string::npos);
  auto m = small_model();
  m.clear_opset_import();
  EXPECT_NE(error_of([&] { vkg::onnx::Model::from_bytes(bytes_of(m)); }).find("imports no opset"),
            std::string::npos);
}

TEST(OnnxModel, UnsupportedOpsOpsetsAndAttributesNameTheNode) {
  auto m = small_model();
  add_node(m.mutable_graph(), "Bernoulli", {"y"}, {"z"}, "my_coin");
  try {
    vkg::onnx::Model::from_bytes(bytes_of(m));
    FAIL() << "no error";
  } catch (const vkg::onnx::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "node 'my_coin' (Bernoulli): operator Bernoulli is not supported"),
              std::string::npos)
        << e.what();
  }
  auto newer = small_model();
  newer.mutable_opset_import(0)->set_version(18);
  EXPECT_NE(error_of([&] {
              vkg::onnx::Model::from_bytes(bytes_of(newer));
            }).find("opset 18 is newer than ONNX 1.12's"),
            std::string::npos);
  auto attr = small_model();
  auto* a = attr.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("frobnicate");
  a->set_type(::onnx::AttributeProto::INT);
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(attr));
  try {
    model.run({{"x", Tensor::zeros({2, 3})}});
    FAIL() << "no error";
  } catch (const vkg::onnx::Unsupported& e) {
    EXPECT_NE(
        std::string(e.what()).find("node 'Relu_0' (Relu): attribute 'frobnicate' is not supported"),
        std::string::npos)
        << e.what();
  }
  auto dtype = small_model();
  dtype.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::COMPLEX64);
  EXPECT_NE(error_of([&] {
              vkg::onnx::Model::from_bytes(bytes_of(dtype));
            }).find("dtype COMPLEX64 is not supported"),
            std::string::npos);
  // Strings load (they live on the host), but an op that computes with numbers rejects them.
  auto strings = small_model();
  strings.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      ::onnx::TensorProto::STRING);
  const auto string_model = vkg::onnx::Model::from_bytes(bytes_of(strings));
  EXPECT_TRUE(string_model.inputs()[0].strings);
  try {
    string_model.run_data({{"x", vkg::onnx::Strings{{2, 3}, {"a", "b", "c", "d", "e", "f"}}}});
    FAIL() << "no error";
  } catch (const vkg::onnx::Unsupported& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "node 'Relu_0' (Relu): string tensors reach an operator that computes with numbers"),
        std::string::npos)
        << e.what();
  }
}

TEST(OnnxModel, WrongInputsAreErrors) {
  const auto m = vkg::onnx::Model::from_bytes(bytes_of(small_model()));
  EXPECT_NE(error_of([&] { m.run({}); }).find("input 'x' is not given"), std::string::npos);
  EXPECT_NE(error_of([&] {
              m.run({{"x", Tensor::zeros({2, 3})}, {"q", Tensor::zeros({1})}});
            }).find("the model has no input 'q'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              m.run({{"x", Tensor::zeros({2, 4})}});
            }).find("input 'x' has shape (2, 4), the model wants (-1, 3)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              m.run({{"x", Tensor::zeros({2, 3}, vkg::dtypes::int32)}});
            }).find("input 'x' must be float32, not int32"),
            std::string::npos);
}

TEST(OnnxModel, OpErrorsNameTheNode) {
  // Add of (2, 3) and a (4,) initializer does not broadcast.
  auto m = small_model();
  auto* b = m.mutable_graph()->mutable_initializer(0);
  b->set_dims(0, 4);
  b->add_float_data(4);
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(m));
  const std::string e = error_of([&] { model.run({{"x", Tensor::zeros({2, 3})}}); });
  EXPECT_NE(e.find("node 'Add_0' (Add)"), std::string::npos) << e;
  // An initializer whose data does not fill its shape.
  auto short_data = small_model();
  short_data.mutable_graph()->mutable_initializer(0)->set_dims(0, 5);
  EXPECT_NE(error_of([&] {
              vkg::onnx::Model::from_bytes(bytes_of(short_data));
            }).find("initializer 'bias'"),
            std::string::npos);
}

TEST(OnnxModel, RunsInsideAJitWithNewInputsEachCall) {
  const auto m = vkg::onnx::Model::from_bytes(bytes_of(small_model()));
  vkg::Jit step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{m.run({{"x", in[0]}}).at("s")};
  });
  for (float k : {1.0f, 2.0f, 3.0f, -1.0f}) {
    // relu(k * [1..6]) + [1, 2, 3] summed per row of 3.
    std::vector<float> x{k * 1, k * 2, k * 3, k * 4, k * 5, k * 6};
    const auto s = step({Tensor(x, {2, 3})})[0].to_vector<float>();
    auto relu = [](float v) { return v > 0 ? v : 0.0f; };
    EXPECT_EQ(s, (std::vector<float>{relu(x[0]) + relu(x[1]) + relu(x[2]) + 6,
                                     relu(x[3]) + relu(x[4]) + relu(x[5]) + 6}))
        << "k = " << k;
  }
}

// Loop with a trip count of 3 whose body adds the outer graph's x to the carried value, and an If
// on a graph input choosing Neg or Identity of the result.
TEST(OnnxModel, LoopAndIfRunTheirSubgraphsWithTheOuterScope) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {2});
  add_input(g, "flip", ::onnx::TensorProto::BOOL, {});
  auto* trip = g->add_initializer();
  trip->set_name("trip");
  trip->set_data_type(::onnx::TensorProto::INT64);
  trip->add_int64_data(3);
  auto* zero = g->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(::onnx::TensorProto::FLOAT);
  zero->add_dims(2);
  zero->add_float_data(0);
  zero->add_float_data(0);
  auto* loop = add_node(g, "Loop", {"trip", "", "zero"}, {"acc"});
  auto* body_attr = loop->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(::onnx::AttributeProto::GRAPH);
  auto* body = body_attr->mutable_g();
  add_input(body, "i", ::onnx::TensorProto::INT64, {});
  add_input(body, "cond_in", ::onnx::TensorProto::BOOL, {});
  add_input(body, "acc_in", ::onnx::TensorProto::FLOAT, {2});
  add_node(body, "Identity", {"cond_in"}, {"cond_out"});
  add_node(body, "Add", {"acc_in", "x"}, {"acc_out"});  // x comes from the outer graph
  add_output(body, "cond_out");
  add_output(body, "acc_out");
  auto* iff = add_node(g, "If", {"flip"}, {"y"});
  for (auto [name, op] : {std::pair{"then_branch", "Neg"}, std::pair{"else_branch", "Identity"}}) {
    auto* a = iff->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    add_node(a->mutable_g(), op, {"acc"}, {std::string(name) + "_out"});
    add_output(a->mutable_g(), std::string(name) + "_out");
  }
  add_output(g, "y");
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(m));
  const Tensor x(std::vector<float>{1.5f, -2.0f}, {2});
  EXPECT_EQ(model.run({{"x", x}, {"flip", Tensor(std::vector<bool>{false}, {})}})
                .at("y")
                .to_vector<float>(),
            (std::vector<float>{4.5f, -6.0f}));
  EXPECT_EQ(model.run({{"x", x}, {"flip", Tensor(std::vector<bool>{true}, {})}})
                .at("y")
                .to_vector<float>(),
            (std::vector<float>{-4.5f, 6.0f}));
}

// --- Malformed models: each a vkg::Error naming the node, never a crash or a std:: exception ---

void set_i(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_ints(::onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void set_s(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}
::onnx::TensorProto* int_init(::onnx::GraphProto* g, const std::string& name,
                              std::vector<int64_t> v, std::optional<std::vector<int64_t>> dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  for (int64_t d : dims.value_or(std::vector<int64_t>{int64_t(v.size())})) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
  return t;
}
::onnx::TensorProto* float_init(::onnx::GraphProto* g, const std::string& name,
                                std::vector<float> v, std::optional<std::vector<int64_t>> dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims.value_or(std::vector<int64_t>{int64_t(v.size())})) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
  return t;
}

// The vkg::Error that loading and running m (on `in`) gives; "" when there is none. A std::
// exception escapes and fails the test.
std::string run_error(const ::onnx::ModelProto& m, const std::map<std::string, Tensor>& in = {}) {
  return error_of([&] { vkg::onnx::Model::from_bytes(bytes_of(m)).run(in); });
}
#define EXPECT_ERROR_HAS(err, text)                                         \
  do {                                                                      \
    const std::string e_ = (err);                                           \
    EXPECT_NE(e_.find(text), std::string::npos) << "error: '" << e_ << "'"; \
  } while (0)

TEST(OnnxMalformed, TfIdfVectorizerIndexesAndCountsOutsideThePool) {
  auto make = [](std::vector<int64_t> counts, std::vector<int64_t> indexes) {
    auto m = model_with(13);
    auto* g = m.mutable_graph();
    int_init(g, "x", {1, 2, 3}, std::nullopt);
    auto* n = add_node(g, "TfIdfVectorizer", {"x"}, {"y"});
    set_i(n, "min_gram_length", 1);
    set_i(n, "max_gram_length", 1);
    set_i(n, "max_skip_count", 0);
    set_s(n, "mode", "TF");
    set_ints(n, "ngram_counts", counts);
    set_ints(n, "ngram_indexes", indexes);
    set_ints(n, "pool_int64s", {2, 3});
    add_output(g, "y");
    return m;
  };
  // The good model counts 2 and 3 in columns 1 and 0.
  auto ok = vkg::onnx::Model::from_bytes(bytes_of(make({0}, {1, 0}))).run({});
  EXPECT_EQ(ok.at("y").to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_ERROR_HAS(run_error(make({0}, {-1, 0})), "ngram_indexes holds -1");
  EXPECT_ERROR_HAS(run_error(make({0}, {0})), "ngram_indexes too short");
  EXPECT_ERROR_HAS(run_error(make({0, 7}, {0, 1})), "do not lie in a pool of 2");
  EXPECT_ERROR_HAS(run_error(make({-3}, {0, 1})), "do not lie in a pool of 2");
}

// One node over graph inputs of the given shapes (float).
::onnx::ModelProto one_node(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                            int64_t opset = 13, int outputs = 1) {
  auto m = model_with(opset);
  auto* g = m.mutable_graph();
  std::vector<std::string> in, out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.push_back("x" + std::to_string(i));
    add_input(g, in.back(), ::onnx::TensorProto::FLOAT, shapes[i]);
  }
  for (int i = 0; i < outputs; ++i) {
    out.push_back("y" + std::to_string(i));
    add_output(g, out.back());
  }
  add_node(g, op, in, out);
  return m;
}
std::map<std::string, Tensor> zeros_for(std::vector<std::vector<int64_t>> shapes) {
  std::map<std::string, Tensor> in;
  for (size_t i = 0; i < shapes.size(); ++i)
    in.emplace("x" + std::to_string(i), Tensor::zeros(vkg::Shape(shapes[i])));
  return in;
}

TEST(OnnxMalformed, RankChecksBeforeIndexingShapes) {
  // LRN and BatchNormalization index the channel axis 1 of a 1-D input.
  EXPECT_ERROR_HAS(run_error(one_node("LRN", {{4}}), zeros_for({{4}})),
                   "node 'LRN_0' (LRN): input X must have rank 2 or more, not shape (4,)");
  auto lrn0 = one_node("LRN", {{1, 4}});
  set_i(lrn0.mutable_graph()->mutable_node(0), "size", 0);
  EXPECT_ERROR_HAS(run_error(lrn0, zeros_for({{1, 4}})), "size is 0");
  const std::vector<std::vector<int64_t>> bn{{3}, {3}, {3}, {3}, {3}};
  EXPECT_ERROR_HAS(run_error(one_node("BatchNormalization", bn), zeros_for(bn)),
                   "input X must have rank 2 or more");
  // NonMaxSuppression's boxes must be (batches, boxes, 4).
  const std::vector<std::vector<int64_t>> nms{{2, 4}, {1, 1, 2}};
  EXPECT_ERROR_HAS(run_error(one_node("NonMaxSuppression", nms), zeros_for(nms)),
                   "must be (batches, boxes, 4) and (batches, classes, boxes)");
  // Conv's and ConvTranspose's weight must have x's rank.
  for (const char* op : {"Conv", "ConvTranspose"}) {
    const std::vector<std::vector<int64_t>> conv{{1, 1, 4}, {3}};
    EXPECT_ERROR_HAS(run_error(one_node(op, conv), zeros_for(conv)),
                     "weight W (3,) must have the rank of X (1, 1, 4)");
  }
  // MaxPool without kernel_shape.
  EXPECT_ERROR_HAS(run_error(one_node("MaxPool", {{1, 1, 4}}), zeros_for({{1, 1, 4}})),
                   "attribute 'kernel_shape' is required");
  // GatherND's indices need an axis for the index tuple; ScatterND's an index of depth 1 or more.
  {
    auto m = one_node("GatherND", {{3}});
    auto* g = m.mutable_graph();
    int_init(g, "i", {1}, std::vector<int64_t>{});
    g->mutable_node(0)->add_input("i");
    EXPECT_ERROR_HAS(run_error(m, zeros_for({{3}})), "indices must have rank 1 or more");
  }
  {
    auto m = model_with(13);
    auto* g = m.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {3});
    int_init(g, "i", {}, std::vector<int64_t>{2, 0});
    float_init(g, "u", {1, 2, 3, 4, 5, 6}, std::vector<int64_t>{2, 3});
    add_node(g, "ScatterND", {"x0", "i", "u"}, {"y"});
    add_output(g, "y");
    EXPECT_ERROR_HAS(run_error(m, zeros_for({{3}})), "indices address 0 axes");
  }
}

TEST(OnnxMalformed, AxesOfAScalarAndRepeatedAxes) {
  // Gather, CumSum, ArgMax and Split on a 0-d input: no axis 0 to index.
  auto gather = model_with(13);
  {
    auto* g = gather.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {});
    int_init(g, "i", {0}, std::vector<int64_t>{});
    add_node(g, "Gather", {"x0", "i"}, {"y"});
    add_output(g, "y");
  }
  const std::map<std::string, Tensor> scalar{{"x0", Tensor::zeros({})}};
  EXPECT_ERROR_HAS(run_error(gather, scalar), "axis 0 is out of range for rank 0");
  for (const char* op : {"ArgMax", "Split", "Softmax"})
    EXPECT_ERROR_HAS(run_error(one_node(op, {{}}), scalar), "is out of range for rank 0");
  auto cumsum = model_with(13);
  {
    auto* g = cumsum.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {});
    int_init(g, "a", {0}, std::vector<int64_t>{});
    add_node(g, "CumSum", {"x0", "a"}, {"y"});
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(cumsum, scalar), "out of range for rank 0");
  // Unsqueeze with an axis named twice.
  auto unsq = model_with(13);
  {
    auto* g = unsq.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {2});
    int_init(g, "axes", {0, 0}, std::nullopt);
    add_node(g, "Unsqueeze", {"x0", "axes"}, {"y"});
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(unsq, zeros_for({{2}})), "axes name an axis twice");
}

TEST(OnnxMalformed, DivisionsByZero) {
  // Split into no outputs with no sizes.
  auto split = one_node("Split", {{4}}, 13, 0);
  EXPECT_ERROR_HAS(run_error(split, zeros_for({{4}})), "has no outputs and no split sizes");
  // Strides of 0 (SAME padding divides by them).
  const std::vector<std::vector<int64_t>> conv{{1, 1, 4}, {1, 1, 2}};
  auto m = one_node("Conv", conv);
  set_s(m.mutable_graph()->mutable_node(0), "auto_pad", "SAME_UPPER");
  set_ints(m.mutable_graph()->mutable_node(0), "strides", {0});
  EXPECT_ERROR_HAS(run_error(m, zeros_for(conv)), "strides holds 0; each must be 1 or more");
  auto pool = one_node("AveragePool", {{1, 1, 4}});
  set_ints(pool.mutable_graph()->mutable_node(0), "kernel_shape", {2});
  set_s(pool.mutable_graph()->mutable_node(0), "auto_pad", "SAME_LOWER");
  set_ints(pool.mutable_graph()->mutable_node(0), "strides", {0});
  EXPECT_ERROR_HAS(run_error(pool, zeros_for({{1, 1, 4}})), "strides holds 0");
}

TEST(OnnxMalformed, LoopAndScanWithTooFewBodyOutputsOrInputs) {
  // A Loop body returning nothing (it must return the condition and each carried value).
  auto loop = model_with(13);
  {
    auto* g = loop.mutable_graph();
    int_init(g, "trip", {2}, std::vector<int64_t>{});
    float_init(g, "v", {1}, std::nullopt);
    auto* n = add_node(g, "Loop", {"trip", "", "v"}, {"y"});
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    add_input(a->mutable_g(), "i", ::onnx::TensorProto::INT64, {});
    add_input(a->mutable_g(), "c", ::onnx::TensorProto::BOOL, {});
    add_input(a->mutable_g(), "v_in", ::onnx::TensorProto::FLOAT, {1});
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(loop), "body has 0 outputs for 1 carried values");
  // A Scan claiming more scan inputs than it has.
  auto scan = model_with(13);
  {
    auto* g = scan.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {3});
    auto* n = add_node(g, "Scan", {"x0"}, {"y"});
    set_i(n, "num_scan_inputs", 2);
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    add_input(a->mutable_g(), "s", ::onnx::TensorProto::FLOAT, {});
    add_node(a->mutable_g(), "Identity", {"s"}, {"o"});
    add_output(a->mutable_g(), "o");
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(scan, zeros_for({{3}})), "num_scan_inputs 2 does not fit its 1");
}

TEST(OnnxMalformed, ResizeNegativeSizesAndRangeTooLong) {
  auto resize = model_with(13);
  {
    auto* g = resize.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {1, 4});
    int_init(g, "sizes", {1, -2}, std::nullopt);
    add_node(g, "Resize", {"x0", "", "", "sizes"}, {"y"});
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(resize, zeros_for({{1, 4}})), "sizes holds -2");
  auto scales = model_with(13);
  {
    auto* g = scales.mutable_graph();
    add_input(g, "x0", ::onnx::TensorProto::FLOAT, {1, 4});
    float_init(g, "scales", {1, std::numeric_limits<float>::quiet_NaN()}, std::nullopt);
    add_node(g, "Resize", {"x0", "", "scales"}, {"y"});
    add_output(g, "y");
  }
  EXPECT_ERROR_HAS(run_error(scales, zeros_for({{1, 4}})), "is not a positive size factor");
  auto range = [](int64_t start, int64_t limit, int64_t delta) {
    auto m = model_with(13);
    auto* g = m.mutable_graph();
    int_init(g, "s", {start}, std::vector<int64_t>{});
    int_init(g, "l", {limit}, std::vector<int64_t>{});
    int_init(g, "d", {delta}, std::vector<int64_t>{});
    add_node(g, "Range", {"s", "l", "d"}, {"y"});
    add_output(g, "y");
    return m;
  };
  // Far-apart ends: limit - start overflows int64; before, a host vector of 2^62 elements.
  EXPECT_ERROR_HAS(run_error(range(std::numeric_limits<int64_t>::min() + 1,
                                   std::numeric_limits<int64_t>::max(), 2)),
                   "elements");
  // A long range is made on the device, and is right.
  const auto y = vkg::onnx::Model::from_bytes(bytes_of(range(7, 7 + 3 * 5000, 3))).run({}).at("y");
  ASSERT_EQ(y.shape(), (vkg::Shape{5000}));
  const auto v = y.to_vector<int64_t>();
  EXPECT_EQ(v.front(), 7);
  EXPECT_EQ(v[1234], 7 + 3 * 1234);
  EXPECT_EQ(v.back(), 7 + 3 * 4999);
}

TEST(OnnxMalformed, ExternalDataOffsetsAndLengths) {
  const std::string dir = testing::TempDir() + "onnx_external_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/w.bin", std::ios::binary);
    const float v[2] = {1.5f, -2.0f};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
  }
  auto make = [&](std::vector<std::pair<std::string, std::string>> kv) {
    auto m = model_with(13);
    auto* g = m.mutable_graph();
    auto* t = g->add_initializer();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    for (auto& [k, v] : kv) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    add_node(g, "Identity", {"w"}, {"y"});
    add_output(g, "y");
    const std::string path = dir + "/m.onnx";
    std::ofstream(path, std::ios::binary) << bytes_of(m);
    return path;
  };
  auto load_error = [&](const std::string& path) {
    return error_of([&] { vkg::onnx::Model::load(path); });
  };
  EXPECT_EQ(
      vkg::onnx::Model::load(make({{"location", "w.bin"}})).run({}).at("y").to_vector<float>(),
      (std::vector<float>{1.5f, -2.0f}));
  EXPECT_ERROR_HAS(load_error(make({{"location", "w.bin"}, {"offset", "abc"}})),
                   "external data offset 'abc' is not a byte count");
  EXPECT_ERROR_HAS(load_error(make({{"location", "w.bin"}, {"offset", "12"}})),
                   "holds 8 bytes, fewer than offset 12");
  EXPECT_ERROR_HAS(
      load_error(make({{"location", "w.bin"}, {"offset", "4"}, {"length", "9223372036854775807"}})),
      "holds 8 bytes, fewer than offset 4");
  std::filesystem::remove_all(dir);
}

// A subgraph's external initializer is read beside the model too (If's branches here), not
// beside the working directory.
TEST(OnnxModel, SubgraphInitializersReadExternalDataBesideTheModel) {
  const std::string dir = testing::TempDir() + "onnx_sub_external_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/w.bin", std::ios::binary);
    const float v[2] = {1.5f, -2.0f};
    f.write(reinterpret_cast<const char*>(v), sizeof v);
  }
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "c", ::onnx::TensorProto::BOOL, {});
  auto* iff = add_node(g, "If", {"c"}, {"y"});
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    auto* t = a->mutable_g()->add_initializer();
    t->set_name(std::string(name) + "_w");
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(1);
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* loc = t->add_external_data();
    loc->set_key("location");
    loc->set_value("w.bin");
    auto* off = t->add_external_data();
    off->set_key("offset");
    off->set_value(name == std::string("then_branch") ? "0" : "4");
    auto* len = t->add_external_data();
    len->set_key("length");
    len->set_value("4");
    add_node(a->mutable_g(), "Identity", {t->name()}, {std::string(name) + "_out"});
    add_output(a->mutable_g(), std::string(name) + "_out");
  }
  add_output(g, "y");
  std::ofstream(dir + "/if.onnx", std::ios::binary) << bytes_of(m);
  const auto model = vkg::onnx::Model::load(dir + "/if.onnx");
  for (bool c : {true, false})
    EXPECT_EQ(model.run({{"c", Tensor(std::vector<bool>{c}, {})}}).at("y").to_vector<float>(),
              (std::vector<float>{c ? 1.5f : -2.0f}));
  std::filesystem::remove_all(dir);
}

// --- Silent wrong answers ---

// The host copy of an integer value follows a Cast as the device's values do: it reaches
// ConstantOfShape (a shape read on the host) through Cast to bool/uint8 and back to int64.
TEST(OnnxModel, CastConvertsHostValuesAsTheDevice) {
  auto make = [](int64_t v, int32_t to) {
    auto m = model_with(13);
    auto* g = m.mutable_graph();
    int_init(g, "v", {v}, std::nullopt);
    set_i(add_node(g, "Cast", {"v"}, {"narrow"}, "c1"), "to", to);
    set_i(add_node(g, "Cast", {"narrow"}, {"wide"}, "c2"), "to", ::onnx::TensorProto::INT64);
    add_node(g, "ConstantOfShape", {"wide"}, {"y"});
    add_output(g, "wide");
    add_output(g, "y");
    return vkg::onnx::Model::from_bytes(bytes_of(m)).run({});
  };
  auto b = make(5, ::onnx::TensorProto::BOOL);
  EXPECT_EQ(b.at("wide").to_vector<int64_t>(), (std::vector<int64_t>{1}));
  EXPECT_EQ(b.at("y").shape(), (vkg::Shape{1}));
  auto u = make(-1, ::onnx::TensorProto::UINT8);
  EXPECT_EQ(u.at("wide").to_vector<int64_t>(), (std::vector<int64_t>{255}));
  EXPECT_EQ(u.at("y").shape(), (vkg::Shape{255}));
  auto i = make(int64_t(1) << 32 | 3, ::onnx::TensorProto::INT32);
  EXPECT_EQ(i.at("wide").to_vector<int64_t>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(i.at("y").shape(), (vkg::Shape{3}));
}

// scan_output_axes = -1 counts against the stacked output's rank (a step's rank + 1): steps of
// shape (2,) stack to (2, 3), not (3, 2).
TEST(OnnxModel, ScanNegativeOutputAxis) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {3, 2});
  auto* n = add_node(g, "Scan", {"x"}, {"y"});
  set_i(n, "num_scan_inputs", 1);
  set_ints(n, "scan_output_axes", {-1});
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  add_input(a->mutable_g(), "row", ::onnx::TensorProto::FLOAT, {2});
  add_node(a->mutable_g(), "Identity", {"row"}, {"o"});
  add_output(a->mutable_g(), "o");
  add_output(g, "y");
  const auto y = vkg::onnx::Model::from_bytes(bytes_of(m))
                     .run({{"x", Tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2})}})
                     .at("y");
  EXPECT_EQ(y.shape(), (vkg::Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

// An integer base to a whole float exponent is the exact power; a fractional one truncates
// (numpy's power(...).astype(int32), ONNX's reference).
TEST(OnnxModel, PowOfIntegerBaseAndFloatExponent) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::INT32, {6});
  add_input(g, "e", ::onnx::TensorProto::FLOAT, {6});
  add_node(g, "Pow", {"x", "e"}, {"y"});
  add_output(g, "y");
  const auto y = vkg::onnx::Model::from_bytes(bytes_of(m))
                     .run({{"x", Tensor(std::vector<int32_t>{3, 7, 9, -3, 2, 10}, {6})},
                           {"e", Tensor(std::vector<float>{6, 4, 5, 3, 1.5f, 9}, {6})}})
                     .at("y");
  EXPECT_EQ(y.dtype(), vkg::dtypes::int32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{729, 2401, 59049, -27, 2, 1000000000}));
}

// --- No device reads per run ---

// Pad's constant value and Resize's scales come from float initializers and a Constant node:
// known on the host at load, so the model runs inside a Jit capture (where a read is an error).
TEST(OnnxModel, FloatScalarOperandsFromInitializersAndConstantsRunInAJit) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x", ::onnx::TensorProto::FLOAT, {1, 2});
  int_init(g, "pads", {0, 1, 0, 0}, std::nullopt);
  float_init(g, "value", {7.5f}, std::vector<int64_t>{});
  auto* c = add_node(g, "Constant", {}, {"scales"});
  auto* v = c->add_attribute();
  v->set_name("value_floats");
  v->set_type(::onnx::AttributeProto::FLOATS);
  v->add_floats(1);
  v->add_floats(2);
  add_node(g, "Pad", {"x", "pads", "value"}, {"p"});
  add_node(g, "Resize", {"p", "", "scales"}, {"y"});
  add_output(g, "y");
  const auto model = vkg::onnx::Model::from_bytes(bytes_of(m));
  vkg::Jit step([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{model.run({{"x", in[0]}}).at("y")};
  });
  for (float k : {1.0f, 2.0f, 3.0f}) {
    const auto y = step({Tensor(std::vector<float>{k, -k}, {1, 2})})[0];
    EXPECT_EQ(y.shape(), (vkg::Shape{1, 6}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{7.5f, 7.5f, k, k, -k, -k})) << k;
  }
}

// Concat before opset 4 concatenates along axis 1 when no axis is given; Dropout before opset 10
// gives its mask in the input's dtype (bool from 10).
TEST(OnnxModel, OldOpsetDefaultsOfConcatAndDropout) {
  const std::vector<std::vector<int64_t>> two{{2, 1}, {2, 1}};
  auto cat = one_node("Concat", two, 3);
  const auto y = vkg::onnx::Model::from_bytes(bytes_of(cat))
                     .run({{"x0", Tensor(std::vector<float>{1, 2}, {2, 1})},
                           {"x1", Tensor(std::vector<float>{3, 4}, {2, 1})}})
                     .at("y0");
  EXPECT_EQ(y.shape(), (vkg::Shape{2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  for (int64_t opset : {9, 10}) {
    auto drop = one_node("Dropout", {{3}}, opset, 2);
    const auto out = vkg::onnx::Model::from_bytes(bytes_of(drop))
                         .run({{"x0", Tensor(std::vector<float>{1, -2, 3}, {3})}});
    EXPECT_EQ(out.at("y0").to_vector<float>(), (std::vector<float>{1, -2, 3}));
    EXPECT_EQ(out.at("y1").dtype(), opset < 10 ? vkg::dtypes::float32 : vkg::dtypes::bool_)
        << "opset " << opset;
  }
}

TEST(OnnxMalformed, OneHotDepthThatIsNoCount) {
  auto m = model_with(13);
  auto* g = m.mutable_graph();
  add_input(g, "x0", ::onnx::TensorProto::INT64, {2});
  float_init(g, "depth", {std::numeric_limits<float>::quiet_NaN()}, std::vector<int64_t>{});
  float_init(g, "values", {0, 1}, std::nullopt);
  add_node(g, "OneHot", {"x0", "depth", "values"}, {"y"});
  add_output(g, "y");
  EXPECT_ERROR_HAS(run_error(m, {{"x0", Tensor(std::vector<int64_t>{0, 1}, {2})}}),
                   "is not a class count");
}

// Loading releases an initializer's protobuf storage, not only its contents (clear() keeps the
// capacity), so no second host copy of the weights stays.
TEST(OnnxModel, ReleasedInitializerStorageIsFreed) {
  ::onnx::TensorProto raw;
  raw.set_data_type(::onnx::TensorProto::FLOAT);
  raw.add_dims(1 << 16);
  raw.set_raw_data(std::string(size_t(4) << 16, '\0'));
  ::onnx::TensorProto typed;
  typed.set_data_type(::onnx::TensorProto::FLOAT);
  typed.add_dims(1 << 16);
  for (int i = 0; i < (1 << 16); ++i) typed.add_float_data(float(i));
  const Tensor a = vkg::onnx::tensor_from_proto(raw, "CPU", "raw", "", true);
  const Tensor b = vkg::onnx::tensor_from_proto(typed, "CPU", "typed", "", true);
  EXPECT_EQ(a.numel(), 1 << 16);
  EXPECT_EQ(b.to_vector<float>()[12345], 12345.0f);
  EXPECT_LT(raw.raw_data().capacity(), 64u);
  EXPECT_EQ(typed.float_data().Capacity(), 0);
}

// Attribute lists shorter than the spatial axes they describe.
TEST(OnnxMalformed, ShortSpatialAttributeLists) {
  const std::vector<std::vector<int64_t>> ct{{1, 1, 2, 2}, {1, 1, 2, 2}};
  auto conv_t = one_node("ConvTranspose", ct);
  set_ints(conv_t.mutable_graph()->mutable_node(0), "output_shape", {3});
  EXPECT_ERROR_HAS(run_error(conv_t, zeros_for(ct)), "output_shape holds 1 values for 2");
  auto unpool = model_with(13);
  auto* g = unpool.mutable_graph();
  add_input(g, "x0", ::onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  int_init(g, "i", {0, 1, 2, 3}, std::vector<int64_t>{1, 1, 2, 2});
  auto* n = add_node(g, "MaxUnpool", {"x0", "i"}, {"y"});
  set_ints(n, "kernel_shape", {2, 2});
  set_ints(n, "strides", {2});
  add_output(g, "y");
  EXPECT_ERROR_HAS(run_error(unpool, zeros_for({{1, 1, 2, 2}})), "do not agree");
}

}  // namespace
