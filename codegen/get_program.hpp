// From a scheduled kernel to the linear program a device runs: Kernel, default opts (unless
// NOOPT=1), lowering. Prints the opts at DEBUG>=3 and the AST and linear UOps at DEBUG>=5; every
// device adapter goes through here, so the output looks the same on every device.
#pragma once
#include <string>

#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/program.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

Program get_program(const ScheduleItem& item, const DeviceTraits& traits);

// The linear program as the seed notes print it: index, op, dtype, sources by index, arg.
std::string to_string(const Program& program);

}  // namespace vkg
