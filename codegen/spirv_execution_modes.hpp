// glslang keeps only the last `spirv_execution_mode` of one mode id: a kernel that declares
// SignedZeroInfNanPreserve (4461) for float32 and float64 got it for float64 only, and Lavapipe
// then folded its float32 math ((x * -0.0).reciprocal() gave +inf where the CPU device gives
// -inf). This puts back, after compilation, every mode the GLSL declares that the module lacks.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace vkg {

// `module` with an OpExecutionMode for each `spirv_execution_mode(capabilities = [..], mode, n)`
// line of `glsl` (one literal operand) that it does not already have, next to the module's first
// OpExecutionMode of that mode. A module without such a mode is returned as it is.
std::vector<uint32_t> with_declared_execution_modes(std::vector<uint32_t> module,
                                                    std::string_view glsl);

}  // namespace vkg
