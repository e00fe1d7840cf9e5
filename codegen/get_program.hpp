// From a scheduled kernel to the linear program a device runs: Kernel, opts (the heuristics'
// unless NOOPT=1, or ones chosen by BEAM search), lowering. Prints the opts at DEBUG>=3 and the AST
// and linear UOps at DEBUG>=5; every device adapter goes through here, so the output looks the
// same on every device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/program.hpp>
#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// `opts`, when given, replaces the heuristics (BEAM's choice); each must apply to the kernel.
Program get_program(const ScheduleItem& item, const DeviceTraits& traits, const RunOptions& options,
                    const std::vector<Opt>* opts = nullptr);

// The opts the heuristics choose for the item's kernel (none under NOOPT).
std::vector<Opt> default_opts(const Kernel& kernel, const DeviceTraits& traits,
                              const RunOptions& options);

// Lowers a kernel whose opts are applied, with the workgroup size the traits give kernels
// without local axes. get_program and BEAM's candidates both lower through here.
Program lower_kernel(const Kernel& kernel, const std::vector<int64_t>& buffer_counts,
                     const DeviceTraits& traits);

// The element count of each buffer of the item, by slot (what their memory holds, for a
// kernel over symbolic sizes).
std::vector<int64_t> buffer_counts(const ScheduleItem& item);

// The values of the program's variables (Program::vars order) in this run of the item. Throws
// vkg::Error naming the kernel and the variable when the item binds none.
std::vector<int64_t> var_values(const Program& program, const ScheduleItem& item);

// The linear program as the seed notes print it: index, op, dtype, sources by index, arg.
std::string to_string(const Program& program);

}  // namespace vkg
