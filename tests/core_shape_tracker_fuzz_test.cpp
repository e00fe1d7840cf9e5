// Property test: random chains of movement ops on small random shapes. After each chain, every
// element's buffer index and validity, read from the ShapeTracker's index expressions (flat via
// expr_node and per-dimension via expr_idxs, evaluated with eval_int), must equal what the same
// ops give when applied for real to an explicit array of buffer indexes.
//
// Reproducible: chain i draws from a std::mt19937 seeded with (seed, i). VKG_FUZZ_SEED,
// VKG_FUZZ_FIRST and VKG_FUZZ_CHAINS set the seed, the first chain and the number of chains; a
// failure prints the settings that rerun just that chain, the op chain and the tracker.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/symbolic.hpp>

using namespace vkg;

namespace {

constexpr int64_t kMaxElements = 720;
constexpr int kMaxDims = 5;

int64_t prod_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

std::vector<int64_t> unravel(const Shape& shape, int64_t flat) {
  std::vector<int64_t> pos(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    pos[i] = flat % shape[i];
    flat /= shape[i];
  }
  return pos;
}

// The array a tracker describes, materialized: for each element (row-major), the buffer index it
// reads or -1 where it is padding.
struct Array {
  Shape shape;
  std::vector<int64_t> src;

  static Array iota(const Shape& shape) {
    Array a{shape, std::vector<int64_t>(size_t(prod_of(shape)))};
    for (size_t i = 0; i < a.src.size(); ++i) a.src[i] = int64_t(i);
    return a;
  }
  // A new array of `new_shape` whose element at position p is this array's element at
  // old_pos(p), or padding where old_pos returns false.
  Array remap(const Shape& new_shape,
              const std::function<bool(const std::vector<int64_t>&, std::vector<int64_t>&)>&
                  old_pos) const {
    Array out{new_shape, std::vector<int64_t>(size_t(prod_of(new_shape)), -1)};
    std::vector<int64_t> q(shape.size());
    for (size_t k = 0; k < out.src.size(); ++k) {
      const std::vector<int64_t> p = unravel(new_shape, int64_t(k));
      if (!old_pos(p, q)) continue;
      int64_t flat = 0;
      for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + q[i];
      out.src[k] = src[size_t(flat)];
    }
    return out;
  }
};

struct MoveOp {
  enum Kind { Reshape, Permute, Expand, Pad, Shrink, Flip, Stride } kind;
  std::vector<int64_t> ints;                       // reshape, permute, expand, stride
  std::vector<std::pair<int64_t, int64_t>> pairs;  // pad, shrink
  std::vector<bool> flags;                         // flip

  std::string str() const {
    static const char* names[] = {"reshape", "permute", "expand", "pad",
                                  "shrink",  "flip",    "stride"};
    std::string s = std::string(names[kind]) + "(";
    if (kind == Pad || kind == Shrink) {
      for (size_t i = 0; i < pairs.size(); ++i)
        s += (i ? ", (" : "(") + std::to_string(pairs[i].first) + ", " +
             std::to_string(pairs[i].second) + ")";
    } else if (kind == Flip) {
      for (size_t i = 0; i < flags.size(); ++i)
        s += (i ? ", " : "") + std::string(flags[i] ? "1" : "0");
    } else {
      s += shape_str(ints);
    }
    return s + ")";
  }

  ShapeTracker apply(const ShapeTracker& st) const {
    switch (kind) {
      case Reshape:
        return st.reshape(ints);
      case Permute:
        return st.permute(ints);
      case Expand:
        return st.expand(ints);
      case Pad:
        return st.pad(pairs);
      case Shrink:
        return st.shrink(pairs);
      case Flip:
        return st.flip(flags);
      case Stride:
        return st.stride(ints);
    }
    return st;
  }

  Array apply(const Array& a) const {
    const Shape& old = a.shape;
    const size_t n = old.size();
    Shape s(n);
    switch (kind) {
      case Reshape:
        return Array{ints, a.src};
      case Permute:
        for (size_t i = 0; i < n; ++i) s[i] = old[size_t(ints[i])];
        return a.remap(s, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i) q[size_t(ints[i])] = p[i];
          return true;
        });
      case Expand:
        return a.remap(ints, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i) q[i] = old[i] == 1 ? 0 : p[i];
          return true;
        });
      case Pad:
        for (size_t i = 0; i < n; ++i) s[i] = old[i] + pairs[i].first + pairs[i].second;
        return a.remap(s, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i) {
            q[i] = p[i] - pairs[i].first;
            if (q[i] < 0 || q[i] >= old[i]) return false;
          }
          return true;
        });
      case Shrink:
        for (size_t i = 0; i < n; ++i) s[i] = pairs[i].second - pairs[i].first;
        return a.remap(s, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i) q[i] = p[i] + pairs[i].first;
          return true;
        });
      case Flip:
        return a.remap(old, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i) q[i] = flags[i] ? old[i] - 1 - p[i] : p[i];
          return true;
        });
      case Stride:
        for (size_t i = 0; i < n; ++i) s[i] = (old[i] + std::abs(ints[i]) - 1) / std::abs(ints[i]);
        return a.remap(s, [&](const auto& p, auto& q) {
          for (size_t i = 0; i < n; ++i)
            q[i] = ints[i] > 0 ? p[i] * ints[i] : old[i] - 1 + p[i] * ints[i];
          return true;
        });
    }
    return a;
  }
};

// ---- random chains ----

struct Gen {
  std::mt19937 rng;
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng); }

  Shape random_shape() {
    for (;;) {
      Shape s(size_t(uniform(0, 4)));
      for (int64_t& x : s) x = uniform(1, 8);
      if (prod_of(s) <= kMaxElements) return s;
    }
  }

  // A shape with `n` elements: split or merge the current dimensions, or factor n afresh.
  Shape reshape_target(const Shape& cur) {
    const int64_t n = prod_of(cur);
    const int how = int(uniform(0, 3));
    if (n == 0) {  // keep a 0 somewhere
      Shape s(size_t(uniform(1, 3)));
      for (int64_t& x : s) x = uniform(1, 3);
      s[size_t(uniform(0, int64_t(s.size()) - 1))] = 0;
      return s;
    }
    if (how == 0 && cur.size() >= 2) {  // merge two adjacent dimensions
      const size_t i = size_t(uniform(0, int64_t(cur.size()) - 2));
      Shape s = cur;
      s[i] *= s[i + 1];
      s.erase(s.begin() + int64_t(i) + 1);
      return s;
    }
    if (how == 1 && !cur.empty() && cur.size() < kMaxDims) {  // split a dimension
      const size_t i = size_t(uniform(0, int64_t(cur.size()) - 1));
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= cur[i]; ++d)
        if (cur[i] % d == 0) divisors.push_back(d);
      const int64_t d = divisors[size_t(uniform(0, int64_t(divisors.size()) - 1))];
      Shape s = cur;
      s[i] = cur[i] / d;
      s.insert(s.begin() + int64_t(i) + 1, d);
      return s;
    }
    if (how == 2 && cur.size() < kMaxDims) {  // insert a 1
      Shape s = cur;
      s.insert(s.begin() + uniform(0, int64_t(s.size())), 1);
      return s;
    }
    // Factor n into up to kMaxDims dimensions.
    Shape s;
    int64_t left = n;
    const size_t dims = size_t(uniform(0, kMaxDims));
    for (size_t k = 0; k + 1 < dims && left > 1; ++k) {
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= left; ++d)
        if (left % d == 0) divisors.push_back(d);
      const int64_t d = divisors[size_t(uniform(0, int64_t(divisors.size()) - 1))];
      s.push_back(d);
      left /= d;
    }
    if (left != 1 || (s.empty() && dims > 0) || chance(0.3)) s.push_back(left);
    return s;
  }

  // A random valid op for shape `cur`, or nullopt if the kind drawn does not apply.
  std::optional<MoveOp> random_op(const Shape& cur) {
    const size_t n = cur.size();
    // Reshape is drawn twice as often: it is where views stack and merge.
    const int64_t draw = uniform(0, 7);
    MoveOp op{draw == 7 ? MoveOp::Reshape : MoveOp::Kind(draw), {}, {}, {}};
    switch (op.kind) {
      case MoveOp::Reshape:
        op.ints = reshape_target(cur);
        break;
      case MoveOp::Permute:
        for (size_t i = 0; i < n; ++i) op.ints.push_back(int64_t(i));
        std::shuffle(op.ints.begin(), op.ints.end(), rng);
        break;
      case MoveOp::Expand: {
        op.ints = cur;
        bool any = false;
        for (size_t i = 0; i < n; ++i)
          if (cur[i] == 1 && chance(0.7)) {
            op.ints[i] = uniform(0, 4);
            any = true;
          }
        if (!any || prod_of(op.ints) > kMaxElements) return std::nullopt;
        break;
      }
      case MoveOp::Pad: {
        for (size_t i = 0; i < n; ++i)
          op.pairs.push_back(chance(0.5) ? std::pair{uniform(0, 2), uniform(0, 2)}
                                         : std::pair<int64_t, int64_t>{0, 0});
        Shape s = cur;
        for (size_t i = 0; i < n; ++i) s[i] += op.pairs[i].first + op.pairs[i].second;
        if (prod_of(s) > kMaxElements) return std::nullopt;
        break;
      }
      case MoveOp::Shrink:
        for (size_t i = 0; i < n; ++i) {
          if (cur[i] == 0 || chance(0.4)) {
            op.pairs.push_back({0, cur[i]});
            continue;
          }
          int64_t b = uniform(0, cur[i] - 1), e = uniform(b + 1, cur[i]);
          if (chance(0.02)) e = b;  // now and then an empty range
          op.pairs.push_back({b, e});
        }
        break;
      case MoveOp::Flip:
        for (size_t i = 0; i < n; ++i) op.flags.push_back(chance(0.5));
        break;
      case MoveOp::Stride: {
        static const int64_t steps[] = {1, 1, 1, -1, -1, 2, -2, 3, -3};
        for (size_t i = 0; i < n; ++i) op.ints.push_back(steps[uniform(0, 8)]);
        break;
      }
    }
    return op;
  }
};

// ---- checking ----

struct Stats {
  int64_t chains = 0, elements = 0, simplified_chains = 0, multi_view = 0, max_views = 0,
          merged_by_simplify = 0, masked = 0, stride_checks = 0, eval_int_elements = 0,
          merged_eagerly = 0, composed = 0;
};

// An index expression evaluated at many points: through eval_int, or through an IntExpr compiled
// once (what eval_int does at every call, and most of its cost on expressions this small).
class Evaluator {
 public:
  Evaluator(const UOpPtr& u, bool use_eval_int) : u_(u), use_eval_int_(use_eval_int), compiled_(u) {
    for (const std::string& name : compiled_.var_names())
      slots_.push_back(std::stoul(name.substr(3)));  // "idx<i>"
  }
  // The value with idx<i> = point[i].
  int64_t operator()(const std::vector<int64_t>& point) {
    if (use_eval_int_) {
      std::map<std::string, int64_t> vars;
      for (size_t i = 0; i < point.size(); ++i) vars["idx" + std::to_string(i)] = point[i];
      return eval_int(u_, vars);
    }
    values_.clear();
    for (size_t slot : slots_) values_.push_back(point[slot]);
    const std::optional<int64_t> v = compiled_(values_);
    if (!v) throw Error("division by zero in " + render(u_));
    return *v;
  }

 private:
  UOpPtr u_;
  bool use_eval_int_;
  IntExpr compiled_;
  std::vector<size_t> slots_;
  std::vector<int64_t> values_;
};

// The first element where the tracker and the array disagree, described; empty if none.
std::string compare(const ShapeTracker& st, const Array& ref, bool simplified, bool use_eval_int,
                    Stats& stats) {
  const Shape& shape = ref.shape;
  if (st.shape() != shape)
    return "shape " + shape_str(st.shape()) + ", expected " + shape_str(shape);
  if (ref.src.empty()) return "";
  const UOpPtr flat = UOp::var("idx0", 0, int64_t(ref.src.size()) - 1);
  std::vector<UOpPtr> idxs;
  for (size_t i = 0; i < shape.size(); ++i)
    idxs.push_back(UOp::var("idx" + std::to_string(i), 0, shape[i] - 1));
  struct Form {
    const char* name;
    IndexExpr e;
    Evaluator index, valid;
  };
  const IndexExpr by_flat = st.expr_node(flat, simplified),
                  by_dims = st.expr_idxs(idxs, simplified);
  Form forms[] = {
      {"expr_node", by_flat, {by_flat.index, use_eval_int}, {by_flat.valid, use_eval_int}},
      {"expr_idxs", by_dims, {by_dims.index, use_eval_int}, {by_dims.valid, use_eval_int}}};
  for (size_t k = 0; k < ref.src.size(); ++k) {
    const std::vector<int64_t> at_flat{int64_t(k)}, pos = unravel(shape, int64_t(k));
    const int64_t want = ref.src[k];
    for (Form& f : forms) {
      const std::vector<int64_t>& point = &f == &forms[0] ? at_flat : pos;
      const bool valid = f.valid(point) != 0;
      const int64_t index = valid ? f.index(point) : -1;
      if (valid != (want >= 0) || (valid && index != want)) {
        std::ostringstream os;
        os << f.name << (simplified ? " (simplified)" : " (unsimplified)") << " at flat " << k
           << " position " << shape_str(pos) << ": got "
           << (valid ? "index " + std::to_string(index) : "invalid") << ", expected "
           << (want >= 0 ? "index " + std::to_string(want) : "invalid")
           << "\n  index = " << render(f.e.index) << "\n  valid = " << render(f.e.valid);
        return os.str();
      }
    }
    ++stats.elements;
    stats.eval_int_elements += use_eval_int;
  }
  return "";
}

// A stride that real_strides reports (minding validity or not) must be the step between every
// two valid neighbours.
std::string check_real_strides(const ShapeTracker& st, const Array& ref, bool ignore_valid,
                               Stats& stats) {
  const auto strides = st.real_strides(ignore_valid);
  for (size_t k = 0; k < ref.src.size(); ++k) {
    const std::vector<int64_t> pos = unravel(ref.shape, int64_t(k));
    int64_t step = 1;
    for (size_t i = ref.shape.size(); i-- > 0; step *= ref.shape[i]) {
      if (!strides[i] || pos[i] + 1 >= ref.shape[i]) continue;
      const int64_t a = ref.src[k], b = ref.src[k + size_t(step)];
      if (a < 0 || b < 0) continue;
      ++stats.stride_checks;
      if (b - a != *strides[i])
        return std::string(ignore_valid ? "real_strides(true)" : "real_strides()") +
               ": stride of dim " + std::to_string(i) + " is " + std::to_string(*strides[i]) +
               " but position " + shape_str(pos) + " steps by " + std::to_string(b - a);
    }
  }
  return "";
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 0) : fallback;
}

}  // namespace

TEST(ShapeTrackerFuzz, RandomMovementChainsMatchAnExplicitArray) {
  const uint64_t seed = env_or("VKG_FUZZ_SEED", 20240531), first = env_or("VKG_FUZZ_FIRST", 0),
                 chains = env_or("VKG_FUZZ_CHAINS", 10000);
  const auto start = std::chrono::steady_clock::now();
  Stats stats;
  int failures = 0;
  for (uint64_t c = first; c < first + chains && failures < 5; ++c) {
    std::seed_seq per_chain{uint32_t(seed), uint32_t(seed >> 32), uint32_t(c), uint32_t(c >> 32)};
    Gen gen{std::mt19937(per_chain)};
    const Shape shape = gen.random_shape();
    ShapeTracker st = ShapeTracker::from_shape(shape);
    Array ref = Array::iota(shape);
    std::vector<MoveOp> ops;
    std::string chain = "from_shape(" + shape_str(shape) + ")";
    const int64_t length = gen.uniform(1, 10);
    while (int64_t(ops.size()) < length) {
      const std::optional<MoveOp> op = gen.random_op(ref.shape);
      if (!op) continue;
      ops.push_back(*op);
      chain += "." + op->str();
      st = op->apply(st);
      ref = op->apply(ref);
    }
    // Every 8th chain goes through simplify and is evaluated with eval_int; the rest check the
    // raw expressions, which are cheaper to build and keep the engine's folds from hiding a wrong
    // expression, evaluated with an IntExpr compiled once per expression.
    const bool simplified = c % 8 == 0;
    std::string why = compare(st, ref, simplified, simplified, stats);
    auto check_also = [&](const ShapeTracker& other, const std::string& what) {
      if (!why.empty()) return;
      why = compare(other, ref, false, false, stats);
      if (!why.empty()) why = what + " gives " + to_string(other) + ":\n  " + why;
    };
    const ShapeTracker merged = st.simplify();
    if (merged != st) {
      ++stats.merged_by_simplify;
      check_also(merged, "simplify()");
    }
    if (c % 4 == 1) {  // merging after every op: later ops then act on merged views
      ShapeTracker eager = ShapeTracker::from_shape(shape);
      for (const MoveOp& op : ops) eager = op.apply(eager).simplify();
      stats.merged_eagerly += eager.views().size() < st.views().size();
      check_also(eager, "simplify() after every op");
    }
    if (c % 4 == 3) {  // the chain cut in two and put back together with +
      const size_t cut = size_t(gen.uniform(0, int64_t(ops.size())));
      ShapeTracker below = ShapeTracker::from_shape(shape);
      for (size_t k = 0; k < cut; ++k) below = ops[k].apply(below);
      ShapeTracker above = ShapeTracker::from_shape(below.shape());
      for (size_t k = cut; k < ops.size(); ++k) above = ops[k].apply(above);
      ++stats.composed;
      check_also(below + above, "+ after op " + std::to_string(cut));
    }
    if (why.empty() && c % 16 == 0) why = check_real_strides(st, ref, false, stats);
    if (why.empty() && c % 16 == 8) why = check_real_strides(st, ref, true, stats);
    if (!why.empty()) {
      ADD_FAILURE() << "chain " << c << " (VKG_FUZZ_SEED=" << seed << " VKG_FUZZ_FIRST=" << c
                    << " VKG_FUZZ_CHAINS=1):\n  " << chain << "\n  " << to_string(st) << "\n  "
                    << why;
      ++failures;
    }
    ++stats.chains;
    stats.simplified_chains += simplified;
    stats.multi_view += st.views().size() > 1;
    stats.max_views = std::max<int64_t>(stats.max_views, int64_t(st.views().size()));
    stats.masked += std::any_of(st.views().begin(), st.views().end(),
                                [](const View& v) { return v.mask.has_value(); });
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ fuzz ] seed " << seed << ": " << stats.chains << " chains ("
            << stats.simplified_chains << " simplified), " << stats.elements
            << " elements checked (" << stats.eval_int_elements << " with eval_int), "
            << stats.multi_view << " with several views (max " << stats.max_views << "), "
            << stats.merged_by_simplify << " merged by simplify(), " << stats.merged_eagerly
            << " fewer views merging after every op, " << stats.composed << " rebuilt with +, "
            << stats.masked << " masked, " << stats.stride_checks << " real-stride checks, " << secs
            << " s\n";
  EXPECT_GE(stats.simplified_chains, std::min<int64_t>(1000, int64_t(chains) / 8));
}
