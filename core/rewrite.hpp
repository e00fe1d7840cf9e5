// The pattern matcher and graph_rewrite: every compiler pass is a set of rules, each a pattern
// over UOps (ops, dtypes, args, constants, named captures, sources) and a function that returns a
// replacement or nullptr. graph_rewrite applies a rule set bottom-up, sources before users,
// until no rule fires anywhere: a new optimization is a new rule, not a new walker.
//
//   PatternMatcher folds{{
//     {UPat::var("x") + 0, [](const Match& m) { return m["x"]; }},
//     {UPat::var("x") * UPat::cvar("c"), [](const Match& m) -> UOpPtr { ... }},
//   }};
//   UOpPtr out = graph_rewrite(root, folds);
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

class UPat {
 public:
  // Any node; captured as `name` if a name is given.
  static UPat var(std::string name = "");
  // Any CONST; captured as `name`.
  static UPat cvar(std::string name = "");
  // A CONST whose value equals v (compared as numbers: 1 matches 1.0 and true).
  static UPat cnst(Scalarish v);
  // A node whose op is `op` (or one of `ops`) with exactly these sources, in this order.
  UPat(Ops op, std::vector<UPat> src);
  explicit UPat(Ops op);
  UPat(std::vector<Ops> ops, std::vector<UPat> src);

  // Refinements; each returns a changed copy.
  UPat named(std::string name) const;
  UPat dtypes(std::vector<DType> allowed) const;        // dtype (or its scalar) is one of these
  UPat dtype_if(bool (*pred)(DType)) const;             // dtype satisfies pred
  UPat with_arg(Arg arg) const;                         // arg equals
  UPat src_prefix(std::vector<UPat> src) const;         // these match the first sources; more may follow
  UPat src_each(UPat each) const;                       // every source (any number) matches `each`
  UPat commutative() const;                             // two sources, matched in either order

  // ALU patterns read like the code they match; commutative ops match both operand orders.
  UPat alu(Ops op, std::vector<UPat> others = {}) const;

 private:
  friend class PatternMatcher;
  friend struct PatternMatching;
  enum class SrcMode : uint8_t { Any, Exact, Prefix, Each, Permute };

  UPat() = default;
  std::vector<Ops> ops_;                   // empty: any op
  std::vector<DType> dtypes_;              // empty: any dtype
  bool (*dtype_pred_)(DType) = nullptr;
  std::optional<Arg> arg_;
  std::optional<double> const_value_;
  std::shared_ptr<const std::vector<UPat>> src_;
  SrcMode mode_ = SrcMode::Any;
  std::string name_;
  int slot_ = -1;                          // capture slot, assigned when a PatternMatcher is built
};

UPat operator+(const UPat& a, const UPat& b);
UPat operator-(const UPat& a, const UPat& b);
UPat operator*(const UPat& a, const UPat& b);
UPat operator/(const UPat& a, const UPat& b);   // IDIV
UPat operator%(const UPat& a, const UPat& b);
UPat operator+(const UPat& a, Scalarish b);
UPat operator-(const UPat& a, Scalarish b);
UPat operator*(const UPat& a, Scalarish b);
UPat operator/(const UPat& a, Scalarish b);
UPat operator%(const UPat& a, Scalarish b);

// What a rule's function sees: the matched node, its named captures, and the rewrite's context.
class Match {
 public:
  static constexpr int kMaxCaptures = 12;

  const UOp& root() const { return *root_; }
  // The node captured as `name`. Throws vkg::Error if the pattern has no such name.
  UOpPtr operator[](std::string_view name) const { return get(name)->ptr(); }
  const UOp* get(std::string_view name) const;
  // The context passed to graph_rewrite, as the type the caller passed.
  template <class T> T& ctx() const { return *static_cast<T*>(ctx_); }

 private:
  friend struct PatternMatching;
  const UOp* root_ = nullptr;
  const std::vector<std::string>* names_ = nullptr;
  const UOp* slots_[kMaxCaptures] = {};
  void* ctx_ = nullptr;
};

using RewriteFn = std::function<UOpPtr(const Match&)>;

struct Rule {
  UPat pattern;
  RewriteFn fn;
};

// An ordered set of rules, indexed by the op at each pattern's root so a node is only tried
// against rules that can match it. Rule sets compose with +.
class PatternMatcher {
 public:
  PatternMatcher() = default;
  PatternMatcher(std::vector<Rule> rules);

  // The first rule (in order) that matches `n` and returns a node; nullptr if none does.
  UOpPtr rewrite(const UOp& n, void* ctx = nullptr) const;
  size_t size() const { return rules_.size(); }

  friend PatternMatcher operator+(const PatternMatcher& a, const PatternMatcher& b);

 private:
  struct Compiled {
    UPat pattern;
    RewriteFn fn;
    std::vector<std::string> names;  // capture slot -> name
  };
  std::vector<std::shared_ptr<const Compiled>> rules_;
  std::vector<std::vector<int>> by_op_;  // op -> indexes into rules_, in rule order
  void index();
};

// Rewrites the graph under `root` with `pm` until no rule applies anywhere: each node's sources
// are rewritten first, then rules are applied to the node (rebuilt on its new sources) until none
// fires, and every node a rule returns is itself rewritten the same way. Results are memoized per
// node, so shared subgraphs are rewritten once. `ctx` reaches the rules as Match::ctx<T>().
UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& pm, void* ctx = nullptr);

}  // namespace vkg
