#include <vkgrad/codegen/kernel.hpp>

#include <algorithm>
#include <map>
#include <numeric>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {
constexpr const char* kOptNames[] = {"LOCAL", "UPCAST", "UNROLL", "GROUP", "SHUFFLE", "STAGE"};
}

int kind_rank(AxisKind k) {
  switch (k) {
    case AxisKind::Global: return 0;
    case AxisKind::Local: return 1;
    case AxisKind::Reduce: return 2;
    case AxisKind::Group: return 3;
    case AxisKind::Unroll: return 4;
    case AxisKind::Upcast:
    case AxisKind::Shuffle: return 5;  // both are output axes in registers; their order is kept
  }
  return 6;
}

char axis_kind_letter(AxisKind k) { return "GLRPUNS"[int(k)]; }

std::string Opt::str() const {
  return std::string(kOptNames[int(op)]) + "(axis=" + std::to_string(axis) + ", amount=" + std::to_string(amount) + ")";
}

Kernel::Kernel(UOpPtr ast) : ast_(std::move(ast)) {
  if (ast_->op != Ops::SINK) throw Error("Kernel: the AST must be a SINK, got " + std::string(op_name(ast_->op)));
  std::vector<int64_t> reduce_axes;
  for (const UOp* u : toposort(ast_.get())) {
    if (u->op == Ops::VIEW) {
      const ShapeTracker* st = ShapeTracker::from_arg(u->arg);
      if (!st) throw Error("Kernel: a VIEW node without a ShapeTracker");
      view_index_[u] = views_.size();
      views_.emplace_back(u, *st);
    }
    if (u->op == Ops::REDUCE_AXIS)
      for (int64_t ax : u->arg_as<ReduceArg>().axes)
        if (std::find(reduce_axes.begin(), reduce_axes.end(), ax) == reduce_axes.end()) reduce_axes.push_back(ax);
  }
  if (views_.empty()) throw Error("Kernel: the AST has no views");
  const size_t ndim = views_[0].second.shape().size();
  full_shape_.assign(ndim, 1);
  for (const auto& [node, st] : views_) {
    if (st.shape().size() != ndim)
      throw Error("Kernel: views of different ranks: " + shape_str(st.shape()) + " and " + shape_str(views_[0].second.shape()));
    // Sizes broadcast: 1 stretches to the other size, and that includes 0 (an empty reduce).
    for (size_t i = 0; i < ndim; ++i)
      full_shape_[i] = (full_shape_[i] == 0 || st.shape()[i] == 0) ? 0 : std::max(full_shape_[i], st.shape()[i]);
  }
  // Symbolic sizes broadcast the same way: a view's plain 1 stretches to the others' size. A plain
  // size other views have as an expression (a plain 2 broadcast with n = 2, which Tensor checked
  // by value and guarded for a Jit's replays) takes the expression: the axis is symbolic, so no
  // opt splits it by its numeric size, n's upper bound (an unroll by 4 of 12 read past n = 2:
  // symbolic binding fuzzer seed 5100404).
  for (const auto& [node, st] : views_)
    if (st.symbolic()) sym_full_shape_.assign(ndim, nullptr);
  for (const auto& [node, st] : views_) {
    if (sym_full_shape_.empty()) break;
    const std::vector<UOpPtr> exprs = st.views().back().shape_exprs();
    for (size_t i = 0; i < ndim; ++i) {
      const bool one = exprs[i]->is_const() && exprs[i]->const_int() == 1;
      const UOpPtr& have = sym_full_shape_[i];
      if (!have || (!one && have->is_const() && have->const_int() == 1) ||
          (!exprs[i]->is_const() && have->is_const()))
        sym_full_shape_[i] = exprs[i];
    }
  }
  kinds_.assign(ndim, AxisKind::Global);
  split_part_.assign(ndim, {-1, false});
  for (int64_t ax : reduce_axes) kinds_[size_t(ax)] = AxisKind::Reduce;
  // Reduce axes go last: a loop nest inside the per-invocation work.
  std::vector<int64_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(), [&](int64_t a) { return kinds_[size_t(a)] != AxisKind::Reduce; });
  permute_axes(order);
  if (reduce_axes.empty()) order_by_loads();
  merge_adjacent();
}

// An elementwise kernel runs in its output's order, unless more of its full loads (those that
// read a new element at every position) share another layout: then it runs in theirs, and its
// one store is the strided access. On a CPU-like device a strided access is a loop over the
// lanes; a batchnorm's backward stored channels-last read 8 inputs that way (beautiful_mnist
// at batch 512, timed against conv2's forward in the same run: 0.45x of it, 0.18x in the
// inputs' order).
void Kernel::order_by_loads() {
  if (symbolic()) return;
  // The axes of size > 1 by descending stride, or empty where a stride is 0 (a broadcast reads
  // few elements). A view stacked on others (a pool's window reshaped back) orders its axes by
  // its own strides, those of the layout it reshapes.
  auto layout = [&](const ShapeTracker& st) {
    const std::vector<std::optional<int64_t>> real = st.real_strides(true);
    std::vector<int64_t> strides = st.views().back().strides;
    if (std::all_of(real.begin(), real.end(), [](const auto& r) { return r.has_value(); }))
      for (size_t a = 0; a < real.size(); ++a) strides[a] = *real[a];
    std::vector<int64_t> axes;
    for (size_t a = 0; a < full_shape_.size(); ++a) {
      if (full_shape_[a] == 1) continue;
      if (strides[a] == 0) return std::vector<int64_t>{};
      axes.push_back(int64_t(a));
    }
    std::stable_sort(axes.begin(), axes.end(), [&](int64_t a, int64_t b) {
      return std::abs(strides[size_t(a)]) > std::abs(strides[size_t(b)]);
    });
    return axes;
  };
  std::map<std::vector<int64_t>, int> votes;
  std::vector<int64_t> stored;
  for (const UOp* u : toposort(ast_.get())) {
    if ((u->op != Ops::LOAD && u->op != Ops::STORE) || is_indexed_load(u)) continue;
    const std::vector<int64_t> l = layout(view(u->src[1].get()));
    if (u->op == Ops::STORE) stored = l;
    if (!l.empty()) ++votes[l];
  }
  if (stored.empty()) return;
  const auto best = std::max_element(
      votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (best == votes.end() || best->first == stored || best->second <= votes[stored]) return;
  // Axes of size 1 first, then the chosen layout's.
  std::vector<int64_t> order;
  for (size_t a = 0; a < full_shape_.size(); ++a)
    if (full_shape_[a] == 1) order.push_back(int64_t(a));
  order.insert(order.end(), best->first.begin(), best->first.end());
  permute_axes(order);
}

bool Kernel::has_reduce() const {
  return std::any_of(kinds_.begin(), kinds_.end(), [](AxisKind k) {
    return k == AxisKind::Reduce || k == AxisKind::Group || k == AxisKind::Unroll;
  });
}

int Kernel::shuffle_axis() const {
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (kinds_[i] == AxisKind::Shuffle) return int(i);
  return -1;
}

bool Kernel::staged() const {
  for (const Opt& o : applied_)
    if (o.op == OptOp::STAGE) return true;
  return false;
}

const ShapeTracker& Kernel::view(const UOp* node) const {
  auto it = view_index_.find(node);
  if (it == view_index_.end()) throw Error("Kernel: not a VIEW of this kernel");
  return views_[it->second].second;
}

const ShapeTracker& Kernel::output_view() const {
  const UOp* store = ast_->src[0].get();
  return view(store->src[1].get());
}

std::vector<const UOp*> Kernel::loads() const {
  std::vector<const UOp*> out;
  for (const UOp* u : toposort(ast_.get()))
    if (u->op == Ops::LOAD) out.push_back(u);
  return out;
}

void Kernel::permute_axes(const std::vector<int64_t>& order) {
  Shape shape(order.size());
  std::vector<AxisKind> kinds(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    shape[i] = full_shape_[size_t(order[i])];
    kinds[i] = kinds_[size_t(order[i])];
  }
  for (auto& [node, st] : views_) st = st.permute(order);
  if (!sym_full_shape_.empty()) {
    std::vector<UOpPtr> sym(order.size());
    for (size_t i = 0; i < order.size(); ++i) sym[i] = sym_full_shape_[size_t(order[i])];
    sym_full_shape_ = std::move(sym);
  }
  std::vector<std::pair<int, bool>> parts(order.size());
  for (size_t i = 0; i < order.size(); ++i) parts[i] = split_part_[size_t(order[i])];
  split_part_ = std::move(parts);
  full_shape_ = std::move(shape);
  kinds_ = std::move(kinds);
}

// Adjacent axes of one kind merge when every view can address the merged axis without a new
// view: fewer axes mean less index arithmetic (a contiguous 2-D add becomes a 1-D one).
void Kernel::merge_adjacent() {
  if (symbolic()) return;  // symbolic axes keep one index each: no division by a variable
  // A short axis that a pad cuts (a stack of 2 to 4 parts: Adam's two moments) stays an axis of
  // its own, so that the heuristics can take it whole into registers (codegen/heuristics.cpp).
  auto cut_short = [&](size_t a) {
    if (full_shape_[a] < 2 || full_shape_[a] > 4) return false;
    for (const auto& [node, st] : views_) {
      const View& v = st.views().back();
      if (v.mask && ((*v.mask)[a].first != 0 || (*v.mask)[a].second != v.shape[a])) return true;
    }
    return false;
  };
  for (int i = int(full_shape_.size()) - 2; i >= 0; --i) {
    if (kinds_[size_t(i)] != kinds_[size_t(i) + 1] || cut_short(size_t(i))) continue;
    std::vector<ShapeTracker> merged;
    bool ok = true;
    for (const auto& [node, st] : views_) {
      Shape s = st.shape();
      s[size_t(i)] *= s[size_t(i) + 1];
      s.erase(s.begin() + i + 1);
      ShapeTracker m = st.reshape(s);
      if (m.views().size() != st.views().size()) {
        ok = false;
        break;
      }
      merged.push_back(std::move(m));
    }
    if (!ok) continue;
    for (size_t v = 0; v < views_.size(); ++v) views_[v].second = std::move(merged[v]);
    full_shape_[size_t(i)] *= full_shape_[size_t(i) + 1];
    full_shape_.erase(full_shape_.begin() + i + 1);
    kinds_.erase(kinds_.begin() + i + 1);
  }
}

void Kernel::split(int axis, int64_t amount, AxisKind kind) {
  for (auto& [node, st] : views_) {
    Shape s = st.shape();
    const int64_t d = s[size_t(axis)];
    // A view that is 1 along a reduce axis (the reduce's output) stays 1 in both halves.
    s[size_t(axis)] = d == 1 ? 1 : d / amount;
    s.insert(s.begin() + axis + 1, d == 1 ? 1 : amount);
    st = st.reshape(s);
  }
  full_shape_[size_t(axis)] /= amount;
  full_shape_.insert(full_shape_.begin() + axis + 1, amount);
  kinds_.insert(kinds_.begin() + axis + 1, kind);
  split_part_.insert(split_part_.begin() + axis + 1, {-1, false});
  sort_axes();
}

void Kernel::sort_axes() {
  // Axes stay in canonical order (global, local, reduce, group, unroll, upcast), so an opt's
  // axis number names the same axis before and after opts of other kinds.
  std::vector<int64_t> order(kinds_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return kind_rank(kinds_[size_t(a)]) < kind_rank(kinds_[size_t(b)]);
  });
  permute_axes(order);
}

void Kernel::split_sym(int axis, int64_t amount, AxisKind kind) {
  const size_t a = size_t(axis);
  const UOpPtr size = sym_full_shape_[a];
  const bool plain = size->is_const();
  // ceil(size / amount) workgroups; a plain size is divided exactly (apply checked).
  const UOpPtr outer = simplify((size + int64_t(amount - 1)) / int64_t(amount));
  std::vector<std::pair<const UOp*, ShapeTracker>> views = views_;
  for (auto& [node, st] : views) {
    const SymbolicView v = st.views().back().symbolic();
    std::vector<UOpPtr> shape = v.shape, strides = v.strides;
    std::vector<SymRange> mask = v.mask;
    const bool one = v.shape[a]->is_const() && v.shape[a]->const_int() == 1;
    if (!mask.empty() && !one &&
        !(mask[a].first->is_const() && mask[a].first->const_int() == 0 &&
          simplify(mask[a].second) == simplify(v.shape[a])))
      throw Error("a view masks the axis (padding): its elements do not split");
    const UOpPtr one_c = UOp::const_(dtypes::int32, 1);
    // A view that is 1 along the axis (broadcast, or a reduce's output) stays 1 in both halves.
    shape[a] = one ? one_c : outer;
    shape.insert(shape.begin() + axis + 1, one ? one_c : UOp::const_(dtypes::int32, amount));
    strides.insert(strides.begin() + axis + 1, strides[a]);
    strides[a] = simplify(strides[a] * amount);
    if (!mask.empty()) {
      mask[a] = {UOp::const_(dtypes::int32, 0), shape[a]};
      mask.insert(mask.begin() + axis + 1, {UOp::const_(dtypes::int32, 0), shape[a + 1]});
    }
    std::vector<View> stack = st.views();
    stack.back() =
        View::create_symbolic(std::move(shape), std::move(strides), v.offset, std::move(mask));
    st = ShapeTracker(std::move(stack));
  }
  views_ = std::move(views);
  int id = -1;
  if (!plain) {
    id = int(sym_splits_.size());
    sym_splits_.push_back({size, amount});
  }
  full_shape_[a] = plain ? full_shape_[a] / amount : (full_shape_[a] + amount - 1) / amount;
  full_shape_.insert(full_shape_.begin() + axis + 1, amount);
  sym_full_shape_[a] = outer;
  sym_full_shape_.insert(sym_full_shape_.begin() + axis + 1, UOp::const_(dtypes::int32, amount));
  kinds_.insert(kinds_.begin() + axis + 1, kind);
  split_part_[a] = {id, false};
  split_part_.insert(split_part_.begin() + axis + 1, {id, true});
  sort_axes();
}

std::vector<UOpPtr> Kernel::sym_guards(const std::vector<UOpPtr>& axis_idx) const {
  std::vector<UOpPtr> outer(sym_splits_.size()), inner(sym_splits_.size());
  for (size_t i = 0; i < split_part_.size() && i < axis_idx.size(); ++i) {
    const auto [id, is_inner] = split_part_[i];
    if (id >= 0) (is_inner ? inner : outer)[size_t(id)] = axis_idx[i];
  }
  std::vector<UOpPtr> out;
  for (size_t s = 0; s < sym_splits_.size(); ++s) {
    if (!outer[s] || !inner[s])
      throw Error("Kernel: a LOCAL split of a symbolic axis without both indexes");
    out.push_back(simplify((outer[s] * sym_splits_[s].amount + inner[s])->lt(sym_splits_[s].size)));
  }
  return out;
}

void Kernel::apply(const Opt& opt) {
  auto fail = [&](const std::string& why) {
    throw Error("opt " + opt.str() + " does not apply to kernel " + describe() + ": " + why);
  };
  if (opt.axis < 0 || size_t(opt.axis) >= full_shape_.size()) fail("no such axis");
  const AxisKind kind = kinds_[size_t(opt.axis)];
  if (symbolic()) {
    // Only LOCAL divides a symbolic size (by a guard); register axes need a plain one.
    const bool plain = sym_full_shape_[size_t(opt.axis)]->is_const();
    if (opt.op != OptOp::LOCAL && opt.op != OptOp::UPCAST && opt.op != OptOp::UNROLL)
      fail("the kernel has symbolic sizes (it takes LOCAL, UPCAST and UNROLL only)");
    if (!plain && opt.op != OptOp::LOCAL)
      fail("the axis has a symbolic size (registers need a plain one; LOCAL splits it)");
    if (opt.amount <= 0 || (plain && full_shape_[size_t(opt.axis)] % opt.amount != 0))
      fail("the amount does not divide the axis");
    if (opt.op == OptOp::LOCAL && kind != AxisKind::Global) fail("LOCAL splits a global axis");
    if (opt.op == OptOp::UPCAST && kind != AxisKind::Global && kind != AxisKind::Local)
      fail("UPCAST splits a global or local axis");
    if (opt.op == OptOp::UNROLL && kind != AxisKind::Reduce) fail("UNROLL splits a reduce axis");
    try {
      split_sym(opt.axis, opt.amount,
                opt.op == OptOp::LOCAL    ? AxisKind::Local
                : opt.op == OptOp::UPCAST ? AxisKind::Upcast
                                          : AxisKind::Unroll);
    } catch (const Error& e) {
      fail(e.what());
    }
    applied_.push_back(opt);
    return;
  }
  if (opt.amount <= 0 || full_shape_[size_t(opt.axis)] % opt.amount != 0) fail("the amount does not divide the axis");
  switch (opt.op) {
    case OptOp::LOCAL:
      if (kind != AxisKind::Global) fail("LOCAL splits a global axis");
      split(opt.axis, opt.amount, AxisKind::Local);
      break;
    case OptOp::UPCAST:
      if (kind != AxisKind::Global && kind != AxisKind::Local) fail("UPCAST splits a global or local axis");
      split(opt.axis, opt.amount, AxisKind::Upcast);
      break;
    case OptOp::UNROLL:
      if (kind != AxisKind::Reduce) fail("UNROLL splits a reduce axis");
      split(opt.axis, opt.amount, AxisKind::Unroll);
      break;
    case OptOp::GROUP:
      if (kind != AxisKind::Reduce) fail("GROUP splits a reduce axis");
      split(opt.axis, opt.amount, AxisKind::Group);
      break;
    case OptOp::STAGE:
      if (kind != AxisKind::Unroll || opt.amount != full_shape_[size_t(opt.axis)])
        fail("STAGE names an unroll axis with its size");
      if (staged()) fail("the kernel is staged already");
      break;
    case OptOp::SHUFFLE:
      if (kind != AxisKind::Global) fail("SHUFFLE splits a global axis");
      if (shuffle_axis() >= 0) fail("the kernel has a SHUFFLE axis already");
      split(opt.axis, opt.amount, AxisKind::Shuffle);
      break;
  }
  applied_.push_back(opt);
}

std::string Kernel::name() const {
  std::string n = has_reduce() ? "r" : "E";
  // A symbolic size by its variables (E_3_i), as tinygrad names them.
  for (size_t i = 0; i < full_shape_.size(); ++i)
    n += "_" + (symbolic() && !sym_full_shape_[i]->is_const() ? render(sym_full_shape_[i])
                                                              : std::to_string(full_shape_[i]));
  return full_shape_.empty() ? n + "_" : n;
}

std::string Kernel::describe() const {
  std::string kinds = "(";
  for (size_t i = 0; i < kinds_.size(); ++i) kinds += std::string(i ? ", " : "") + axis_kind_letter(kinds_[i]);
  kinds += kinds_.size() == 1 ? ",)" : ")";
  std::string opts = "[";
  for (size_t i = 0; i < applied_.size(); ++i) opts += (i ? ", " : "") + applied_[i].str();
  return "full_shape=" + shape_str(full_shape_) + " kinds=" + kinds + " opts=" + opts + "]";
}

}  // namespace vkg
