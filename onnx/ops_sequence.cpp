// Sequences and optionals: SequenceConstruct/Empty/Insert/Erase/At/Length, SplitToSequence,
// ConcatFromSequence, SequenceMap (a subgraph per element), and Optional, OptionalHasElement,
// OptionalGetElement. A sequence is a list of lazy tensors; positions may be negative.
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

int64_t position(OpContext& c, size_t input, int64_t size, int64_t fallback, bool insert) {
  int64_t p = c.has(input) ? c.int_in(input) : fallback;
  if (p < 0) p += size;
  if (p < 0 || p > size - (insert ? 0 : 1))
    c.fail("position " + std::to_string(p) + " is outside a sequence of " + std::to_string(size));
  return p;
}

std::vector<Value> construct(OpContext& c) {
  Sequence s;
  for (size_t i = 0; i < c.num_inputs(); ++i) s.push_back(c.in(i));
  return {Value(s)};
}

std::vector<Value> empty(OpContext& c) {
  c.ignore_attr("dtype");
  return {Value(Sequence{})};
}

std::vector<Value> insert(OpContext& c) {
  Sequence s = c.value(0).sequence();
  const int64_t p = position(c, 2, int64_t(s.size()), int64_t(s.size()), true);
  s.insert(s.begin() + p, c.in(1));
  return {Value(s)};
}

std::vector<Value> erase(OpContext& c) {
  Sequence s = c.value(0).sequence();
  const int64_t p = position(c, 1, int64_t(s.size()), int64_t(s.size()) - 1, false);
  s.erase(s.begin() + p);
  return {Value(s)};
}

std::vector<Value> at(OpContext& c) {
  const Sequence& s = c.value(0).sequence();
  return {s[size_t(position(c, 1, int64_t(s.size()), 0, false))]};
}

std::vector<Value> length(OpContext& c) {
  return {host_value({int64_t(c.value(0).sequence().size())}, {}, dtypes::int64, c.device())};
}

std::vector<Value> split_to_sequence(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
  const bool keep = c.attr_i("keepdims", 1) != 0;
  const int64_t n = x.shape()[size_t(axis)];
  std::vector<Tensor> parts;
  if (!c.has(1)) {
    parts = x.split(int64_t(1), axis);
    if (!keep)
      for (auto& p : parts) p = p.squeeze(axis);
  } else if (c.in(1).ndim() == 0) {
    parts = x.split(c.int_in(1), axis);
  } else {
    parts = x.split(c.ints_in(1), axis);
  }
  (void)n;
  return {Value(Sequence(parts.begin(), parts.end()))};
}

std::vector<Value> concat_from_sequence(OpContext& c) {
  const Sequence& s = c.value(0).sequence();
  if (s.empty()) c.fail("the sequence is empty");
  const bool stack = c.attr_i("new_axis", 0) != 0;
  const int64_t rank = s[0].ndim() + (stack ? 1 : 0);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), rank);
  return {stack ? Tensor::stack(s, axis) : Tensor::cat(s, axis)};
}

// SequenceMap: the body once per element of the sequence inputs (tensor inputs passed whole).
std::vector<Value> sequence_map(OpContext& c) {
  const auto& body = c.graph_attr("body");
  const size_t n = c.value(0).sequence().size();
  std::vector<Sequence> outs(size_t(body.output_size()));
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> in;
    for (size_t k = 0; k < c.num_inputs(); ++k) {
      const Value& v = c.value(k);
      if (v.is_sequence()) {
        if (v.sequence().size() != n) c.fail("its sequences differ in length");
        in.emplace_back(v.sequence()[i]);
      } else {
        in.push_back(v);
      }
    }
    auto out = c.run_subgraph(body, in);
    for (size_t k = 0; k < outs.size(); ++k) outs[k].push_back(out[k].tensor());
  }
  std::vector<Value> result;
  for (auto& s : outs) result.emplace_back(std::move(s));
  return result;
}

std::vector<Value> optional(OpContext& c) {
  c.ignore_attr("type");
  if (c.has(0)) return {c.value(0)};
  return {Value(None{})};
}

std::vector<Value> has_element(OpContext& c) {
  const bool has = c.has(0) && !c.value(0).is_none();
  return {host_value({has ? 1 : 0}, {}, dtypes::bool_, c.device())};
}

std::vector<Value> get_element(OpContext& c) {
  if (!c.has(0) || c.value(0).is_none()) c.fail("the optional is empty");
  return {c.value(0)};
}

}  // namespace

void add_sequence_ops(OpTable& t) {
  t["SequenceConstruct"] = construct;
  t["SequenceEmpty"] = empty;
  t["SequenceInsert"] = insert;
  t["SequenceErase"] = erase;
  t["SequenceAt"] = at;
  t["SequenceLength"] = length;
  t["SplitToSequence"] = split_to_sequence;
  t["ConcatFromSequence"] = concat_from_sequence;
  t["SequenceMap"] = sequence_map;
  t["Optional"] = optional;
  t["OptionalHasElement"] = has_element;
  t["OptionalGetElement"] = get_element;
}

}  // namespace vkg::onnx
