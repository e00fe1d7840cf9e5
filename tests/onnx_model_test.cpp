// vkg::onnx on models built here with libonnx_proto's classes: results against hand-computed
// values, host-known shapes, and every kind of bad input as a clear vkg::Error.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <vkgrad/core/jit.hpp>
#include <vkgrad/onnx/model.hpp>

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

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const vkg::Error& e) {
    return e.what();
  }
  return "";
}

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

}  // namespace
