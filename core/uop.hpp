// UOp: the one IR of vkgrad, from tensor graph to linear kernel program. A node is
// {op, dtype, src, arg}, immutable and hash-consed: building the same node twice gives the same
// object, so equality is pointer identity and equal subgraphs are one node. Nodes are shared by
// UOpPtr and freed when nothing refers to them; interning is thread-safe.
#pragma once
#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/ops.hpp>
#include <vkgrad/core/shape.hpp>

namespace vkg {

class UOp;
using UOpPtr = std::shared_ptr<const UOp>;
struct RealizedRecord;  // core/schedule.cpp
template <class T>
concept IsUOpPtr = std::same_as<std::remove_cvref_t<T>, UOpPtr>;

// Arguments richer than the built-in alternatives below (a ShapeTracker, a kernel's opts)
// implement this to take part in hashing, interning and printing.
struct ArgPayload {
  virtual ~ArgPayload() = default;
  virtual size_t hash() const = 0;
  // Called only when `other` has the same dynamic type.
  virtual bool equals(const ArgPayload& other) const = 0;
  virtual std::string repr() const = 0;
};

// DEFINE_VAR's argument: a symbolic integer with inclusive bounds.
struct VarArg {
  std::string name;
  int64_t min = 0, max = 0;
  bool operator==(const VarArg&) const = default;
};

// REDUCE_AXIS's argument: the reducing ALU op (ADD, MAX, MUL) and the axes it reduces.
struct ReduceArg {
  Ops op = Ops::ADD;
  std::vector<int64_t> axes;
  bool operator==(const ReduceArg&) const = default;
};

// A node's argument. Doubles compare by their bits, so 0.0 and -0.0 are distinct constants and a
// nan constant is interned like any other.
using Arg = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                         VarArg, ReduceArg, std::shared_ptr<const ArgPayload>>;

bool arg_equal(const Arg& a, const Arg& b);
size_t arg_hash(const Arg& a);
std::string arg_repr(const Arg& a);

// A C++ literal on its way to becoming a CONST: remembers whether it was a bool, an integer or
// a floating-point value so that the dtype rules can tell them apart.
struct Scalarish {
  std::variant<bool, int64_t, double> v;
  Scalarish(bool b) : v(b) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Scalarish(T i) : v(int64_t(i)) {}
  template <std::floating_point T>
  Scalarish(T f) : v(double(f)) {}
  ScalarKind kind() const;
  double as_double() const;
};

class UOp : public std::enable_shared_from_this<UOp> {
 public:
  const Ops op;
  const DType dtype;
  const std::vector<UOpPtr> src;
  const Arg arg;

  // The interned node with these fields: an existing one if it is alive, else a new one.
  static UOpPtr make(Ops op, DType dtype, std::vector<UOpPtr> src = {}, Arg arg = {});
  // A CONST of dtype `d` holding `value` converted to d (wrapped to an integer's width, rounded
  // to a float's precision), so that every device sees the same constant.
  static UOpPtr const_(DType d, Scalarish value);
  // A symbolic integer variable in [min, max].
  static UOpPtr var(std::string name, int64_t min, int64_t max, DType d = dtypes::int32);

  size_t hash() const { return hash_; }
  UOpPtr ptr() const { return shared_from_this(); }

  // Inclusive bounds of the value, for integer and bool dtypes (for other dtypes, the dtype's
  // range clamped to int64). Computed once, at construction, from the sources' bounds.
  int64_t vmin() const { return vmin_; }
  int64_t vmax() const { return vmax_; }

  // The shape of a tensor-level node (BUFFER, CONST, movement ops, REDUCE_AXIS, and ALU ops, casts
  // and CONTIGUOUS over shaped nodes of one shape); nullptr for kernel-level and symbolic nodes.
  // Computed once, at construction (core/shape_rules.cpp).
  const Shape* shape() const { return shape_ ? &*shape_ : nullptr; }
  // The same shape as integer expressions over unbound variables, for nodes whose shape holds a
  // symbolic size (core/symbolic_shape.hpp); nullptr when every dimension is a plain number.
  const std::vector<UOpPtr>* sym_shape() const { return sym_shape_ ? &*sym_shape_ : nullptr; }

  // The DEVICE node this tensor-level node lives on: itself for a DEVICE, else its first source's
  // (BUFFER and tensor-level CONST nodes have a DEVICE source). nullptr for nodes with none.
  const UOp* device_node() const { return device_; }

  bool is_const() const { return op == Ops::CONST; }
  // A CONST's value as a double (int64 values beyond 2^53 round). Throws if not a CONST.
  double const_value() const;
  // A CONST's value as int64 (truncating floats). Throws if not a CONST.
  int64_t const_int() const;

  template <class T> const T& arg_as() const { return std::get<T>(arg); }

  // Build an ALU node over this and `others`: comparisons give bool, the rest keep this dtype.
  UOpPtr alu(Ops op, const std::vector<UOpPtr>& others = {}) const;
  UOpPtr cast(DType d) const;
  // A CONST of this node's dtype.
  UOpPtr const_like(Scalarish v) const;

  // Comparisons and max, against a node or a C++ literal (which becomes a CONST of this dtype).
  // The node overloads are templates so that a literal 0 is not mistaken for a null UOpPtr.
  template <IsUOpPtr T> UOpPtr lt(const T& b) const { return alu(Ops::CMPLT, {b}); }
  UOpPtr lt(Scalarish b) const { return lt(const_like(b)); }
  template <IsUOpPtr T> UOpPtr ne(const T& b) const { return alu(Ops::CMPNE, {b}); }
  UOpPtr ne(Scalarish b) const { return ne(const_like(b)); }
  template <IsUOpPtr T> UOpPtr eq(const T& b) const { return ne(b)->logical_not(); }
  UOpPtr eq(Scalarish b) const { return eq(const_like(b)); }
  template <IsUOpPtr T> UOpPtr ge(const T& b) const { return lt(b)->logical_not(); }
  UOpPtr ge(Scalarish b) const { return ge(const_like(b)); }
  template <IsUOpPtr T> UOpPtr maximum(const T& b) const { return alu(Ops::MAX, {b}); }
  UOpPtr maximum(Scalarish b) const { return maximum(const_like(b)); }
  UOpPtr where(const UOpPtr& t, const UOpPtr& f) const;  // this ? t : f
  UOpPtr logical_not() const;

  ~UOp();
  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

 private:
  UOp(Ops op, DType dtype, std::vector<UOpPtr> src, Arg arg, size_t hash);
  friend struct UOpInterner;
  friend struct RealizedValues;  // core/schedule.cpp
  size_t hash_;
  int64_t vmin_ = 0, vmax_ = 0;
  std::optional<Shape> shape_;
  // Set once by make(), after interning: building it makes nodes, which the interner's lock
  // (held while a node is constructed) forbids.
  mutable std::optional<std::vector<UOpPtr>> sym_shape_;
  mutable std::once_flag sym_once_;
  const UOp* device_ = nullptr;  // a source of this node (or this node) keeps it alive
  // The buffer view holding this node's value once a schedule has computed it: set by the
  // scheduler under its lock, not part of the node's identity. Kept on the node so that the
  // record, and the buffer it holds, die with the node (a table keyed by node would have to find
  // its dead entries, and pin their buffers until it did).
  mutable std::shared_ptr<const RealizedRecord> realized_;
};

// Arithmetic that builds (unsimplified) ALU nodes. Integer `/` is IDIV and `%` is MOD, both
// truncating toward zero as C does; on floats `/` is FDIV.
// `a op b` for two nodes; / picks IDIV or FDIV by a's dtype.
UOpPtr binary(Ops op, const UOpPtr& a, const UOpPtr& b);
template <IsUOpPtr A, IsUOpPtr B> UOpPtr operator+(const A& a, const B& b) { return binary(Ops::ADD, a, b); }
template <IsUOpPtr A, IsUOpPtr B> UOpPtr operator-(const A& a, const B& b) { return binary(Ops::SUB, a, b); }
template <IsUOpPtr A, IsUOpPtr B> UOpPtr operator*(const A& a, const B& b) { return binary(Ops::MUL, a, b); }
template <IsUOpPtr A, IsUOpPtr B> UOpPtr operator/(const A& a, const B& b) { return binary(Ops::IDIV, a, b); }
template <IsUOpPtr A, IsUOpPtr B> UOpPtr operator%(const A& a, const B& b) { return binary(Ops::MOD, a, b); }
UOpPtr operator-(const UOpPtr& a);
UOpPtr operator+(const UOpPtr& a, Scalarish b);
UOpPtr operator-(const UOpPtr& a, Scalarish b);
UOpPtr operator*(const UOpPtr& a, Scalarish b);
UOpPtr operator/(const UOpPtr& a, Scalarish b);
UOpPtr operator%(const UOpPtr& a, Scalarish b);
UOpPtr operator+(Scalarish a, const UOpPtr& b);
UOpPtr operator-(Scalarish a, const UOpPtr& b);
UOpPtr operator*(Scalarish a, const UOpPtr& b);

// Every node reachable from `root`, sources before users, each once.
std::vector<const UOp*> toposort(const UOp* root);

// The nested form tinygrad prints: UOp(Ops.ADD, dtypes.int32, arg=None, src=( ... )), with each
// node that is used more than once named at its first appearance (x3:=UOp(...)) and referred to by
// name afterwards.
std::string to_string(const UOpPtr& u);
std::ostream& operator<<(std::ostream& os, const UOpPtr& u);

// How many nodes are alive in the intern table (for tests of freeing).
size_t live_uop_count();

}  // namespace vkg
