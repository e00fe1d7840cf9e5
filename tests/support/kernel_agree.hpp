// The fixture of the codegen tests that run linear programs on Vulkan: render, compile and run a
// Program through the vk runtime, and compare its written buffers with the CPU reference
// interpreter's, element by element.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/devices/vk_target.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

#include "support/linear_programs.hpp"
#include "support/vk_fixture.hpp"

namespace vkg::test {

class Kernels : public testing::Test {
 protected:
  vk::Runtime& rt_ = vk_runtime();
  GlslTarget target_ = glsl_target_of(rt_.device.caps());

  // Renders, compiles and runs p on the device; the written buffers come back in place.
  void run_on_vulkan(const Program& p, std::vector<Bytes>& buffers,
                     const std::vector<int64_t>& vars = {}) {
    SpirvCompileOptions options;
    options.device_key = rt_.device.caps().name;
    options.name = p.name;
    const std::vector<uint32_t> spirv = compile_glsl(render_glsl(p, target_), options);
    const ArgLayout layout = arg_layout(p, target_);
    vk::Program kernel(rt_.device, p.name, spirv, layout.push_constant_bytes,
                       bindings_of(layout, p.buffers.size()));
    std::vector<vk::Buffer> device;
    std::vector<uint64_t> addresses;
    for (const Bytes& b : buffers) {
      device.push_back(rt_.allocator.allocate(b.size()));
      rt_.transfer.upload(device.back(), b);
      addresses.push_back(device.back().address());
    }
    std::vector<vk::BufferUse> uses;
    for (std::size_t k = 0; k < device.size(); ++k)
      uses.push_back({&device[k], p.buffers[k].written ? vk::Access::ReadWrite : vk::Access::Read});
    vk::Queue queue(rt_.device, rt_.allocator);
    std::vector<std::byte> args = pack_args(p, layout, addresses, vars);
    if (layout.spilled) args = pack_spill_address(queue.spill(args));
    // A symbolic kernel launches the workgroups its variables' values need.
    const auto [x, y, z] =
        vars.size() == p.vars.size() ? launch_dims(p, target_, vars) : launch_dims(p, target_);
    queue.dispatch(kernel, vk::Groups{x, y, z}, args, uses);
    queue.finish();
    for (std::size_t k = 0; k < device.size(); ++k)
      if (p.buffers[k].written) rt_.transfer.download(device[k], buffers[k]);
  }

  // Runs p on the interpreter and on the device from the same inputs (outputs start as 0xcd
  // bytes) and compares every written element: integers and bools exactly, floats to `ulps`
  // units in the last place with nan matching nan. Returns the device's buffers.
  std::vector<Bytes> expect_agree(const Program& p, std::vector<Bytes> inputs, int ulps = 0,
                                  const std::vector<int64_t>& vars = {}) {
    for (std::size_t k = 0; k < inputs.size(); ++k)
      if (p.buffers[k].written) std::fill(inputs[k].begin(), inputs[k].end(), std::byte{0xcd});
    std::vector<Bytes> cpu = inputs, gpu = inputs;
    run_on_cpu(p, cpu, vars);
    run_on_vulkan(p, gpu, vars);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (!p.buffers[k].written) continue;
      int reported = 0;
      const DType d = p.buffers[k].dtype;
      const std::size_t n = cpu[k].size() / std::size_t(d.scalar_size());
      for (std::size_t i = 0; i < n && reported < 10; ++i) {
        const std::string diff = compare(d, cpu[k].data() + i * std::size_t(d.scalar_size()),
                                         gpu[k].data() + i * std::size_t(d.scalar_size()), ulps);
        if (!diff.empty()) {
          ADD_FAILURE() << p.name << " data" << k << "[" << i << "]: " << diff;
          ++reported;
        }
      }
    }
    return gpu;
  }

  static double as_double(DType d, const std::byte* at) {
    return visit_dtype(d, [&](auto tag) -> double {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return *at != std::byte{0};
      } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
        uint16_t bits;
        std::memcpy(&bits, at, 2);
        return float(T::from_bits(bits));
      } else {
        T v;
        std::memcpy(&v, at, sizeof(T));
        return double(v);
      }
    });
  }

  // Empty when the two elements agree, else what each side has.
  static std::string compare(DType d, const std::byte* cpu, const std::byte* gpu, int ulps) {
    const double a = as_double(d, cpu), b = as_double(d, gpu);
    if (!d.is_float()) {
      if (std::memcmp(cpu, gpu, std::size_t(d.scalar_size())) == 0 || (d.is_bool() && a == b))
        return {};
      return describe(a, b);
    }
    if (std::isnan(a) && std::isnan(b)) return {};
    if (a == b && std::signbit(a) == std::signbit(b)) return {};
    const double eps = d == dtypes::float16 ? 0x1p-10 : d == dtypes::float64 ? 0x1p-52 : 0x1p-23;
    const double tiny = d == dtypes::float16   ? 0x1p-14
                        : d == dtypes::float64 ? 0x1p-1022
                                               : 0x1p-126;
    if (std::isfinite(a) && std::isfinite(b) &&
        std::abs(a - b) <= ulps * eps * std::max({std::abs(a), std::abs(b), tiny}))
      return {};
    return describe(a, b);
  }

  static std::string describe(double cpu, double gpu) {
    std::ostringstream s;
    s.precision(17);
    s << "interpreter " << cpu << " vs device " << gpu;
    return s.str();
  }
};

}  // namespace vkg::test
