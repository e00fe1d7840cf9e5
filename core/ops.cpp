#include <vkgrad/core/ops.hpp>

#include <array>

namespace vkg {

namespace {

constexpr std::array<std::string_view, kOpsCount> kNames = {
#define VKG_OP_NAME(name, ...) #name,
    VKG_OPS(VKG_OP_NAME)
#undef VKG_OP_NAME
};

// The data columns of alu_table.hpp, indexed by op (arity 0 for the ops that are not ALU).
constexpr std::array<AluInfo, kOpsCount> kAlu = [] {
  std::array<AluInfo, kOpsCount> t{};
  using namespace alu;
#define VKG_ALU_INFO(op, arity, dtypes, result, flags, ...) \
  t[size_t(Ops::op)] = AluInfo{arity, uint8_t(dtypes), result, uint8_t(flags)};
  VKG_ALU_OPS(VKG_ALU_INFO)
#undef VKG_ALU_INFO
  return t;
}();

// The family of each op: by ranges of the enum for the ops VKG_OPS lists before the ALU ones
// (grouped), by arity for the ALU ops.
constexpr OpFamily family_of(Ops op) {
  if (op <= Ops::KERNEL) return OpFamily::Meta;
  if (op <= Ops::SCATTER) return OpFamily::Tensor;
  if (op <= Ops::VIEW) return OpFamily::Movement;
  if (op <= Ops::REDUCE) return OpFamily::Reduce;
  if (op <= Ops::BITCAST) return OpFamily::Kernel;
  constexpr OpFamily kByArity[] = {OpFamily::Kernel, OpFamily::Unary, OpFamily::Binary,
                                   OpFamily::Ternary};
  return kByArity[kAlu[size_t(op)].arity];
}

}  // namespace

std::string_view op_name(Ops op) { return kNames[size_t(op)]; }
OpFamily op_family(Ops op) { return family_of(op); }
bool is_alu(Ops op) { return family_of(op) >= OpFamily::Unary; }
bool is_commutative(Ops op) { return kAlu[size_t(op)].has(alu::Commutes); }
const AluInfo& alu_info(Ops op) { return kAlu[size_t(op)]; }
bool is_comparison(Ops op) { return op == Ops::CMPLT || op == Ops::CMPNE; }
bool is_movement(Ops op) { return op >= Ops::RESHAPE && op <= Ops::FLIP; }

}  // namespace vkg
