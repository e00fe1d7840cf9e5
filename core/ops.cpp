#include <vkgrad/core/ops.hpp>

#include <array>

namespace vkg {

namespace {

constexpr std::array<std::string_view, kOpsCount> kNames = {
#define VKG_OP_NAME(name) #name,
    VKG_OPS(VKG_OP_NAME)
#undef VKG_OP_NAME
};

// The family of each op, by ranges of the enum (VKG_OPS lists them grouped).
constexpr OpFamily family_of(Ops op) {
  if (op <= Ops::KERNEL) return OpFamily::Meta;
  if (op <= Ops::EMPTY) return OpFamily::Tensor;
  if (op <= Ops::VIEW) return OpFamily::Movement;
  if (op <= Ops::REDUCE) return OpFamily::Reduce;
  if (op <= Ops::BITCAST) return OpFamily::Kernel;
  if (op <= Ops::TRUNC) return OpFamily::Unary;
  if (op <= Ops::THREEFRY) return OpFamily::Binary;
  return OpFamily::Ternary;
}

constexpr bool commutes(Ops op) {
  return op == Ops::ADD || op == Ops::MUL || op == Ops::MAX || op == Ops::CMPNE ||
         op == Ops::XOR || op == Ops::OR || op == Ops::AND;
}

}  // namespace

std::string_view op_name(Ops op) { return kNames[size_t(op)]; }
OpFamily op_family(Ops op) { return family_of(op); }
bool is_alu(Ops op) { return family_of(op) >= OpFamily::Unary; }
bool is_commutative(Ops op) { return commutes(op); }
bool is_comparison(Ops op) { return op == Ops::CMPLT || op == Ops::CMPNE; }
bool is_movement(Ops op) { return op >= Ops::RESHAPE && op <= Ops::FLIP; }

}  // namespace vkg
