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

// `module` with every float add, subtract and multiply decorated NoContraction, so that no driver
// fuses a * b + c into an fma. Why: NVIDIA's H100 did, and a fused result differs from the CPU
// device's (which rounds the product, as Lavapipe does) by an ulp where they should agree bit for
// bit (a * b + c, Adam's update), and in special values: a * b that overflows to inf while
// a * b + c is finite, or -0 from a product that underflows plus +0. A GPU loses the fused
// instruction in multiply-add chains (a matmul's inner loop does two ops where it did one);
// vkgrad's kernels wait on memory far more than on that. Results then also agree between GPUs.
std::vector<uint32_t> with_no_contraction(std::vector<uint32_t> module);

}  // namespace vkg
