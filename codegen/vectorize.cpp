#include <vkgrad/codegen/vectorize.hpp>

#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

// Accumulators differ only in their ids; every other op must agree on its arg too.
bool same_op(const std::vector<UOpPtr>& lanes) {
  const UOp& a = *lanes[0];
  for (const UOpPtr& l : lanes)
    if (l->op != a.op || l->dtype != a.dtype || l->src.size() != a.src.size() ||
        (a.op != Ops::DEFINE_ACC && !(l->arg == a.arg)))
      return false;
  return true;
}

// Ops that act lane by lane on vectors as on scalars, in the renderer and the interpreter alike.
bool lanewise(Ops op) { return is_alu(op) || op == Ops::CAST; }

}  // namespace

bool LaneVectorizer::consecutive(const std::vector<UOpPtr>& indexes) {
  // The same buffer, and the same valid mask where there is one (a padded input's window reads
  // four channels of one pixel: all in the padding or none).
  for (const UOpPtr& ix : indexes)
    if (ix->op != Ops::INDEX || ix->src.size() < 2 || ix->src.size() > 3 ||
        ix->src.size() != indexes[0]->src.size() || ix->src[0] != indexes[0]->src[0] ||
        (ix->src.size() == 3 && ix->src[2] != indexes[0]->src[2]))
      return false;
  for (size_t k = 1; k < indexes.size(); ++k) {
    const UOpPtr diff = simplify(indexes[k]->src[1] - indexes[0]->src[1]);
    if (diff->op != Ops::CONST || diff->const_int() != int64_t(k)) return false;
  }
  return true;
}

UOpPtr LaneVectorizer::vectorize(const std::vector<UOpPtr>& lanes) {
  std::vector<const UOp*> key;
  for (const UOpPtr& l : lanes) key.push_back(l.get());
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  UOpPtr out = vectorize_uncached(lanes);
  keep_.push_back(lanes);
  memo_.emplace(std::move(key), out);
  return out;
}

UOpPtr LaneVectorizer::vectorize_uncached(const std::vector<UOpPtr>& lanes) {
  const int w = int(lanes.size());
  const UOp& a = *lanes[0];
  const DType vd = a.dtype.vec(w);
  auto keep_scalar = [] { return UOpPtr(); };  // the lanes do not line up
  if (a.dtype.count != 1 || a.dtype.is_ptr() || !same_op(lanes)) return keep_scalar();
  switch (a.op) {
    case Ops::CONST:
      for (const UOpPtr& l : lanes)
        if (l != lanes[0]) return keep_scalar();
      return UOp::make(Ops::CONST, vd, {}, a.arg);
    case Ops::LOAD: {
      // LOAD(INDEX) or, masked, LOAD(INDEX, alt): lanes of one mask read their alts together.
      std::vector<UOpPtr> idx, alts;
      for (const UOpPtr& l : lanes) {
        if (l->src.size() != lanes[0]->src.size() || l->src.size() > 2) return keep_scalar();
        idx.push_back(l->src[0]);
        if (l->src.size() == 2) alts.push_back(l->src[1]);
      }
      if (!consecutive(idx)) return keep_scalar();
      if (alts.empty()) return UOp::make(Ops::LOAD, vd, {idx[0]});
      const UOpPtr alt = vectorize(alts);
      if (!alt) return keep_scalar();
      return UOp::make(Ops::LOAD, vd, {idx[0], alt});
    }
    case Ops::DEFINE_ACC: {
      // Per-lane accumulators over the same loops become one vector accumulator.
      for (const UOpPtr& l : lanes)
        for (size_t s = 1; s < l->src.size(); ++s)
          if (l->src[s] != a.src[s]) return keep_scalar();
      std::vector<UOpPtr> src{vectorize([&] {
        std::vector<UOpPtr> init;
        for (const UOpPtr& l : lanes) init.push_back(l->src[0]);
        return init;
      }())};
      if (!src[0] || src[0]->op != Ops::CONST) return keep_scalar();
      src.insert(src.end(), a.src.begin() + 1, a.src.end());
      return UOp::make(Ops::DEFINE_ACC, vd, std::move(src), next_acc_++);
    }
    case Ops::ASSIGN: {
      std::vector<UOpPtr> accs, values;
      for (const UOpPtr& l : lanes) accs.push_back(l->src[0]), values.push_back(l->src[1]);
      const UOpPtr acc = vectorize(accs), value = vectorize(values);
      if (!acc || acc->op != Ops::DEFINE_ACC || !value) return keep_scalar();
      return UOp::make(Ops::ASSIGN, vd, {acc, value});
    }
    default:
      break;
  }
  if (!lanewise(a.op)) return keep_scalar();
  std::vector<UOpPtr> src;
  for (size_t s = 0; s < a.src.size(); ++s) {
    std::vector<UOpPtr> operand;
    for (const UOpPtr& l : lanes) operand.push_back(l->src[s]);
    // The same scalar in every lane (a row of A in a matmul tile) is broadcast.
    bool same = true;
    for (const UOpPtr& o : operand) same = same && o == operand[0];
    src.push_back(same && operand[0]->op != Ops::CONST
                      ? UOp::make(Ops::VECTORIZE, operand[0]->dtype.vec(w), operand)
                      : vectorize(operand));
    if (!src.back()) return keep_scalar();
  }
  return UOp::make(a.op, vd, std::move(src), a.arg);
}

}  // namespace vkg
