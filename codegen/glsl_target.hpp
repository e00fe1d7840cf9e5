// What the GLSL renderer may assume about the device it writes for. The device adapter fills it
// from the Vulkan capabilities record; codegen itself knows nothing of Vulkan. The defaults are
// what every Vulkan 1.3 device with bufferDeviceAddress has (no optional dtypes).
#pragma once
#include <array>
#include <cstdint>

namespace vkg {

struct GlslTarget {
  // Arithmetic on these dtypes (shaderFloat16, shaderInt8, shaderInt16, shaderInt64,
  // shaderFloat64). A dtype that a kernel computes in needs its flag.
  bool float16 = false;
  bool int8 = false;
  bool int16 = false;
  bool int64 = false;
  bool float64 = false;
  // 8- and 16-bit loads and stores in storage buffers (storageBuffer8BitAccess,
  // storageBuffer16BitAccess). bool lives in buffers as a byte, so it needs storage_8bit.
  bool storage_8bit = false;
  bool storage_16bit = false;
  // 64-bit atomics on storage buffers (shaderBufferInt64Atomics): a scatter into a 64-bit
  // buffer combines with them.
  bool int64_atomics = false;
  uint32_t max_push_constants_size = 128;  // bytes
  std::array<uint32_t, 3> max_workgroup_count{65535, 65535, 65535};
  uint32_t subgroup_size = 32;
  // subgroupShuffle in compute shaders (VK_SUBGROUP_FEATURE_SHUFFLE_BIT): SHUFFLE ops need it.
  bool subgroup_shuffle = false;
  // Storage buffers bound by push descriptor (glsl_launch.hpp's ArgLayout decides per kernel):
  // at most this many in one kernel (the smaller of maxPushDescriptors and
  // maxPerStageDescriptorStorageBuffers; 0: never, buffers go by device address), each at most
  // max_storage_buffer_range bytes.
  uint32_t max_bound_buffers = 0;
  uint64_t max_storage_buffer_range = 0;
  // Bound buffers that a kernel only reads, of float32, int32 or uint32, read as uniform texel
  // buffers (usamplerBuffer of R32_UINT words, texelFetch) instead of storage buffers, when their
  // element count fits max_texel_buffer_elements. Why: Lavapipe turns every storage-buffer load
  // into a loop over the SIMD lanes with a bounds check each, and a texel fetch into one gather;
  // the MLP step's forward matmul reads 33% faster (bench_vk BM_TexelLoads_Gen*).
  bool texel_loads = false;
  // With texel_loads, buffers a kernel both reads and writes (an optimizer's in-place update)
  // are read through texel views too, and written through their storage buffer. Safe because
  // the linearizer puts every load of a buffer before any store to it (no invocation reads what
  // this dispatch wrote), so the view never needs to see the dispatch's own writes; kernels with
  // a combining (atomic) store to the buffer keep the storage path. Adam's update of the MLP
  // step's 784x128 weight: 15% less CPU (bench_vk BM_TexelLoads_GenAdam*).
  bool texel_loads_written = false;
  uint64_t max_texel_buffer_elements = 0;
  // Uniform texel buffers count against the device's sampled images per stage
  // (maxPerStageDescriptorSampledImages, as low as 16): past it, read-only buffers stay storage
  // buffers and no vector views are added.
  uint32_t max_texel_descriptors = 0;
  // The device keeps IEEE signed zeros, infinities and nan in float16/32/64 arithmetic when a
  // shader asks (shaderSignedZeroInfNanPreserveFloatN): the renderer then asks, so that the
  // driver's compiler cannot fold x * 0 to 0 or (x * a) * b to x * (a * b) where that changes
  // an inf, a nan or a zero's sign.
  bool preserve_specials_float16 = false;
  bool preserve_specials_float32 = false;
  bool preserve_specials_float64 = false;
  // The device keeps subnormal floats of that width when a shader asks
  // (shaderDenormPreserveFloatN): the renderer then declares DenormPreserve. Without it NVIDIA
  // flushed float32 subnormals to zero (1e-40 * 1 gave 0, log2 of a subnormal gave -191,
  // bfloat16's smallest values vanished); the CPU device keeps them, as IEEE does.
  bool denorm_preserve_float16 = false;
  bool denorm_preserve_float32 = false;
  bool denorm_preserve_float64 = false;
  // Which widths' denormal modes may differ in one kernel (Vulkan's denormBehaviorIndependence):
  // with Bit32Only float16 and float64 are declared together or neither, with None all three.
  // A tied width the kernel does not compute in is declared where the device keeps it (Vulkan
  // asks only shaderDenormPreserveFloatN of a DenormPreserve); where one tied width cannot be
  // kept, none of them is declared and their subnormals may flush (vkgrad-info says so).
  enum class DenormIndependence : uint8_t { All, Bit32Only, None };
  DenormIndependence denorm_independence = DenormIndependence::All;
  // float32 sqrt is corrected to the correctly rounded root (glsl_helpers_arithmetic.cpp's
  // sqrt_body): Vulkan allows about 3 ulp, and NVIDIA's H100 was 1 ulp off. Off only where the
  // device's sqrt is known to be IEEE's (Lavapipe: LLVM's sqrt, SSE's sqrtps), which spares its CPU
  // time (bench_nn MlpAdamStep_Jit took ~12% more process CPU with the correction).
  bool exact_sqrt = true;
  // float32 division is float(double(a) / double(b)) (with float64): the device divides doubles
  // exactly and converts to float rounding to nearest even, keeping subnormals, inf and nan, so
  // the quotient is the correctly rounded one (glsl_helpers_arithmetic.cpp, fdiv_via_double_body,
  // says why a double quotient suffices). Only where that is known (Lavapipe: LLVM's fdiv and
  // fptrunc, SSE's divpd and cvtpd2ps); elsewhere the helper rounds the bits itself. On Lavapipe
  // the division in Adam's update of a 784x128 weight took ~27% of that kernel (bench_nn
  // MlpAdamStep_Jit).
  bool float_of_double_division = false;

  // Every optional feature on, with the minimum limits (tests render for it without a device).
  static GlslTarget everything() {
    GlslTarget t;
    t.float16 = t.int8 = t.int16 = t.int64 = t.float64 = t.storage_8bit = t.storage_16bit = true;
    t.subgroup_shuffle = true;
    t.int64_atomics = true;
    t.preserve_specials_float16 = t.preserve_specials_float32 = t.preserve_specials_float64 = true;
    t.denorm_preserve_float16 = t.denorm_preserve_float32 = t.denorm_preserve_float64 = true;
    return t;
  }
};

}  // namespace vkg
