#include <vkgrad/core/rewrite.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <vkgrad/core/error.hpp>

namespace vkg {

// ---- building patterns ----

UPat UPat::var(std::string name) {
  UPat p;
  p.name_ = std::move(name);
  return p;
}

UPat UPat::cvar(std::string name) {
  UPat p = var(std::move(name));
  p.ops_ = {Ops::CONST};
  return p;
}

UPat UPat::cnst(Scalarish v) {
  UPat p = cvar();
  p.const_value_ = v.as_double();
  return p;
}

UPat::UPat(Ops op) { ops_ = {op}; }

UPat::UPat(Ops op, std::vector<UPat> src) : UPat(std::vector<Ops>{op}, std::move(src)) {}

UPat::UPat(std::vector<Ops> ops, std::vector<UPat> src) : ops_(std::move(ops)) {
  src_ = std::make_shared<const std::vector<UPat>>(std::move(src));
  mode_ = SrcMode::Exact;
}

UPat UPat::named(std::string name) const {
  UPat p = *this;
  p.name_ = std::move(name);
  return p;
}

UPat UPat::dtypes(std::vector<DType> allowed) const {
  UPat p = *this;
  p.dtypes_ = std::move(allowed);
  return p;
}

UPat UPat::dtype_if(bool (*pred)(DType)) const {
  UPat p = *this;
  p.dtype_pred_ = pred;
  return p;
}

UPat UPat::with_arg(Arg arg) const {
  UPat p = *this;
  p.arg_ = std::move(arg);
  return p;
}

UPat UPat::src_prefix(std::vector<UPat> src) const {
  UPat p = *this;
  p.src_ = std::make_shared<const std::vector<UPat>>(std::move(src));
  p.mode_ = SrcMode::Prefix;
  return p;
}

UPat UPat::src_each(UPat each) const {
  UPat p = *this;
  p.src_ = std::make_shared<const std::vector<UPat>>(std::vector<UPat>{std::move(each)});
  p.mode_ = SrcMode::Each;
  return p;
}

UPat UPat::commutative() const {
  if (!src_ || src_->size() != 2) throw Error("a commutative pattern needs exactly two sources");
  UPat p = *this;
  p.mode_ = SrcMode::Permute;
  return p;
}

UPat UPat::alu(Ops op, std::vector<UPat> others) const {
  std::vector<UPat> src{*this};
  src.insert(src.end(), others.begin(), others.end());
  UPat p(op, std::move(src));
  return (is_commutative(op) && p.src_->size() == 2) ? p.commutative() : p;
}

UPat operator+(const UPat& a, const UPat& b) { return a.alu(Ops::ADD, {b}); }
UPat operator-(const UPat& a, const UPat& b) { return a.alu(Ops::SUB, {b}); }
UPat operator*(const UPat& a, const UPat& b) { return a.alu(Ops::MUL, {b}); }
UPat operator/(const UPat& a, const UPat& b) { return a.alu(Ops::IDIV, {b}); }
UPat operator%(const UPat& a, const UPat& b) { return a.alu(Ops::MOD, {b}); }
UPat operator+(const UPat& a, Scalarish b) { return a + UPat::cnst(b); }
UPat operator-(const UPat& a, Scalarish b) { return a - UPat::cnst(b); }
UPat operator*(const UPat& a, Scalarish b) { return a * UPat::cnst(b); }
UPat operator/(const UPat& a, Scalarish b) { return a / UPat::cnst(b); }
UPat operator%(const UPat& a, Scalarish b) { return a % UPat::cnst(b); }

// ---- matching ----

const UOp* Match::get(std::string_view name) const {
  for (size_t i = 0; i < names_->size(); ++i)
    if ((*names_)[i] == name) return slots_[i];
  throw Error("pattern has no capture named '" + std::string(name) + "'");
}

// Backtracking match of one pattern against one node. Each step takes a continuation `k` (what
// must still match after this step) so that a commutative pattern can retry the other operand
// order when a later part of the pattern, or the rule's function, rejects the first.
struct PatternMatching {
  // A non-owning reference to a callable returning bool: no allocation on the match path.
  struct Cont {
    bool (*call)(const void*);
    const void* obj;
    template <class L>
    static Cont of(const L& l) {
      return {[](const void* o) { return (*static_cast<const L*>(o))(); }, &l};
    }
    bool operator()() const { return call(obj); }
  };

  Match& m;
  int trail[Match::kMaxCaptures] = {};
  int trail_len = 0;

  PatternMatching(Match& match, const UOp* root, const std::vector<std::string>* names, void* ctx)
      : m(match) {
    m.root_ = root;
    m.names_ = names;
    m.ctx_ = ctx;
  }

  bool local_ok(const UPat& p, const UOp* n) const {
    if (!p.ops_.empty() && std::find(p.ops_.begin(), p.ops_.end(), n->op) == p.ops_.end()) return false;
    if (!p.dtypes_.empty() && std::none_of(p.dtypes_.begin(), p.dtypes_.end(), [&](DType d) {
          return d == n->dtype || d == n->dtype.base();
        }))
      return false;
    if (p.dtype_pred_ && !p.dtype_pred_(n->dtype)) return false;
    if (p.const_value_ && (n->op != Ops::CONST || n->const_value() != *p.const_value_)) return false;
    if (p.arg_ && !arg_equal(*p.arg_, n->arg)) return false;
    return true;
  }

  bool match(const UPat& p, const UOp* n, Cont k) {
    if (!local_ok(p, n)) return false;
    const int saved = trail_len;
    if (p.slot_ >= 0) {
      const UOp*& slot = m.slots_[p.slot_];
      if (slot && slot != n) return false;  // a name used twice must capture one node
      if (!slot) {
        slot = n;
        trail[trail_len++] = p.slot_;
      }
    }
    if (match_sources(p, n, k)) return true;
    while (trail_len > saved) m.slots_[trail[--trail_len]] = nullptr;
    return false;
  }

  bool match_sources(const UPat& p, const UOp* n, Cont k) {
    using Mode = UPat::SrcMode;
    const auto& src = n->src;
    switch (p.mode_) {
      case Mode::Any: return k();
      case Mode::Exact:
        return src.size() == p.src_->size() && match_seq(*p.src_, src, 0, k);
      case Mode::Prefix:
        return src.size() >= p.src_->size() && match_seq(*p.src_, src, 0, k);
      case Mode::Each: return match_each(p.src_->front(), src, 0, k);
      case Mode::Permute: {
        if (src.size() != 2) return false;
        const UPat &a = (*p.src_)[0], &b = (*p.src_)[1];
        auto second = [&](const UOp* x, const UOp* y) {
          auto rest = [&] { return match(b, y, k); };
          return match(a, x, Cont::of(rest));
        };
        return second(src[0].get(), src[1].get()) ||
               (src[0] != src[1] && second(src[1].get(), src[0].get()));
      }
    }
    return false;
  }

  bool match_seq(const std::vector<UPat>& pats, const std::vector<UOpPtr>& src, size_t i, Cont k) {
    if (i == pats.size()) return k();
    auto rest = [&] { return match_seq(pats, src, i + 1, k); };
    return match(pats[i], src[i].get(), Cont::of(rest));
  }

  bool match_each(const UPat& each, const std::vector<UOpPtr>& src, size_t i, Cont k) {
    if (i == src.size()) return k();
    auto rest = [&] { return match_each(each, src, i + 1, k); };
    return match(each, src[i].get(), Cont::of(rest));
  }
};

// ---- rule sets ----

PatternMatcher::PatternMatcher(std::vector<Rule> rules) {
  for (Rule& r : rules) {
    auto c = std::make_shared<Compiled>();
    c->pattern = std::move(r.pattern);
    c->fn = std::move(r.fn);
    // Give every distinct capture name a slot, in first-seen order. Source lists are shared
    // between copies of a pattern, so they are copied before slots are written into them.
    std::function<void(UPat&)> walk = [&](UPat& p) {
      if (!p.name_.empty()) {
        auto it = std::find(c->names.begin(), c->names.end(), p.name_);
        p.slot_ = int(it - c->names.begin());
        if (it == c->names.end()) c->names.push_back(p.name_);
        if (c->names.size() > size_t(Match::kMaxCaptures))
          throw Error("a pattern may capture at most " + std::to_string(Match::kMaxCaptures) + " names");
      }
      if (p.src_) {
        auto copy = std::make_shared<std::vector<UPat>>(*p.src_);
        for (UPat& s : *copy) walk(s);
        p.src_ = std::move(copy);
      }
    };
    walk(c->pattern);
    rules_.push_back(std::move(c));
  }
  index();
}

void PatternMatcher::index() {
  by_op_.assign(kOpsCount, {});
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& ops = rules_[i]->pattern.ops_;
    for (int op = 0; op < kOpsCount; ++op)
      if (ops.empty() || std::find(ops.begin(), ops.end(), Ops(op)) != ops.end())
        by_op_[size_t(op)].push_back(int(i));
  }
}

PatternMatcher operator+(const PatternMatcher& a, const PatternMatcher& b) {
  PatternMatcher out;
  out.rules_ = a.rules_;
  out.rules_.insert(out.rules_.end(), b.rules_.begin(), b.rules_.end());
  out.index();
  return out;
}

UOpPtr PatternMatcher::rewrite(const UOp& n, void* ctx) const {
  if (by_op_.empty()) return nullptr;
  for (int i : by_op_[size_t(n.op)]) {
    const Compiled& rule = *rules_[size_t(i)];
    Match m;
    PatternMatching pm(m, &n, &rule.names, ctx);
    UOpPtr result;
    auto accept = [&] {
      result = rule.fn(m);
      return result != nullptr;
    };
    if (pm.match(rule.pattern, &n, PatternMatching::Cont::of(accept))) return result;
  }
  return nullptr;
}

// ---- graph_rewrite ----

UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, void* ctx) {
  // memo: node -> its fully rewritten form. The key's UOpPtr keeps the key alive, so a freed
  // node's address can never be reused by a new node and hit a stale entry.
  std::unordered_map<const UOp*, std::pair<UOpPtr, UOpPtr>> memo;
  std::unordered_set<const UOp*> in_progress;
  auto done = [&](const UOp* n) -> const UOpPtr* {
    auto it = memo.find(n);
    return it == memo.end() ? nullptr : &it->second.second;
  };

  // stage 0: schedule the sources; 1: rebuild on rewritten sources or apply rules;
  // 2: the node's result is the result of what stage 1 turned it into.
  struct Step {
    UOpPtr n;
    int stage;
    UOpPtr next;
  };
  std::vector<Step> stack{{root, 0, root}};
  while (!stack.empty()) {
    Step s = std::move(stack.back());
    stack.pop_back();
    if (s.stage == 0) {
      if (done(s.n.get())) continue;
      if (!in_progress.insert(s.n.get()).second)
        throw Error("graph_rewrite: rules rewrite a node into a graph that contains it:\n" + to_string(s.n));
      stack.push_back({s.n, 1, s.n});
      for (auto it = s.n->src.rbegin(); it != s.n->src.rend(); ++it)
        if (!done(it->get())) stack.push_back({*it, 0, *it});
    } else if (s.stage == 1) {
      const UOp& n = *s.next;
      std::vector<UOpPtr> new_src;
      new_src.reserve(n.src.size());
      bool changed = false;
      for (const UOpPtr& x : n.src) {
        new_src.push_back(*done(x.get()));
        changed |= new_src.back() != x;
      }
      UOpPtr next = changed ? UOp::make(n.op, n.dtype, std::move(new_src), n.arg) : pm.rewrite(n, ctx);
      if (!next) {
        in_progress.erase(s.n.get());
        memo.emplace(s.n.get(), std::pair{s.n, s.next});
        continue;
      }
      stack.push_back({s.n, 2, next});
      stack.push_back({next, 0, next});
    } else {
      in_progress.erase(s.n.get());
      UOpPtr result = *done(s.next.get());
      memo.emplace(s.n.get(), std::pair{s.n, std::move(result)});
    }
  }
  return *done(root.get());
}

}  // namespace vkg
