// The CPU reference interpreter of linear programs (codegen/program.hpp): slow, simple and exact,
// the oracle every device is tested against and the CPU device (DEVICE=CPU).
//
// It runs one workgroup at a time with all of its invocations as lanes in lockstep, so that
// DEFINE_LOCAL and BARRIER mean what they mean on a GPU; IF narrows the set of active lanes and
// loops must be uniform across the workgroup. Value semantics per dtype are in cpu_alu.hpp.
//
// It doubles as a bug detector for code generation. These throw vkg::Error naming the kernel:
//   - a load or store outside its buffer that no valid operand masks off (slot and index given);
//   - a lane reading workgroup-local memory another lane wrote since the last BARRIER;
//   - a BARRIER reached by only some lanes of a workgroup, a loop bound that differs across lanes;
//   - anything that is not of the program form (an op out of place, a source used before it is
//     defined, a dtype an op does not take).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include <vkgrad/codegen/program.hpp>

namespace vkg {

// The bytes of one buffer argument, for the slot at its position. Its element count is its size
// divided by the element size of the slot's dtype (bool is one byte).
using HostBuffer = std::span<std::byte>;

// Runs `program` over its whole launch (global_size workgroups of local_size invocations).
// `buffers` holds one HostBuffer per slot; `var_values` the DEFINE_VARs in Program::vars order,
// each within its bounds.
void run_program(const Program& program, std::span<const HostBuffer> buffers,
                 std::span<const int64_t> var_values = {});

}  // namespace vkg
