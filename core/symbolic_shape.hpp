// Symbolic shapes at the graph level. A tensor-level node whose shape holds a variable keeps two
// shapes: UOp::shape() with the bound values (checks, buffer sizes) and UOp::sym_shape() with an
// integer expression per dimension over unbound DEFINE_VARs (what the scheduler builds kernels
// from, so that every binding gives the same kernel AST).
//
// A movement node with a symbolic argument carries a SymbolicArg instead of its int vector: the
// values, one expression per value, and the bindings its expressions were built with. A BIND
// node (src: expression, DEVICE; arg: SymbolicArg with the bindings) is a 0-d int32 tensor whose
// value is an expression over bound variables: what mean divides by over a symbolic axis.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <vkgrad/core/uop.hpp>
#include <vkgrad/core/variable.hpp>

namespace vkg {

struct SymbolicArg final : ArgPayload {
  std::vector<int64_t> values;  // as the int vector of a concrete node
  std::vector<UOpPtr> exprs;    // one per value: a CONST or an expression over DEFINE_VARs
  std::vector<Binding> bindings;
  size_t hash() const override;
  bool equals(const ArgPayload& other) const override;
  std::string repr() const override;
};

Arg make_symbolic_arg(std::vector<int64_t> values, std::vector<UOpPtr> exprs,
                      std::vector<Binding> bindings);

// The SymbolicArg of a movement or BIND node, or nullptr.
const SymbolicArg* symbolic_arg(const UOp& u);
// A movement node's integer arguments, from its int vector or its SymbolicArg; nullptr if neither.
const std::vector<int64_t>* movement_values(const UOp& u);

// The symbolic shape of a node (nullopt when every dimension is a plain number). Called once per
// node, at construction.
std::optional<std::vector<UOpPtr>> compute_sym_shape(const UOp& u);

// The expressions of a node's shape: sym_shape() if it has one, else its numbers as CONSTs.
std::vector<UOpPtr> shape_exprs(const UOp& u);

// The most elements a shape of these expressions holds under any binding of its variables (each
// dimension at its upper bound; saturates at INT64_MAX).
int64_t max_elements(const std::vector<UOpPtr>& sym_shape);

// The bindings of the variables in a node's symbolic shape, and of the symbolic nodes under it
// that it got them from (a walk over symbolic nodes only).
std::vector<Binding> collect_bindings(const UOp* n);

// `target` (numbers) matched to the dimensions of `from` (values and expressions) for a reshape
// that only inserts or removes dimensions of size 1: the expressions of the result, or nullopt
// where the reshape regroups dimensions (the result is then plain numbers).
std::optional<std::vector<UOpPtr>> carry_reshape(const Shape& from_values,
                                                 const std::vector<UOpPtr>& from_exprs,
                                                 const Shape& target);

}  // namespace vkg
