// The Vulkan runtime for one device, assembled in dependency order: instance, device, allocator,
// transfers. The device adapter and the tests hold one of these; queues and programs are made
// from its parts:
//
//   vk::Runtime rt;                                  // VK_DEVICE, VKG_VALIDATION from the env
//   vk::Buffer a = rt.allocator.allocate(bytes);
//   rt.transfer.upload(a, std::as_bytes(std::span(host)));
//   vk::Program p(rt.device, "add", spirv, 32);      // pipeline made on first dispatch
//   vk::Queue q(rt.device, rt.allocator);
//   q.dispatch(p, groups, vk::ArgPack().address(a).address(b).address(c).u32(n).bytes(),
//              {{&a, vk::Access::Read}, {&b, vk::Access::Read}, {&c, vk::Access::Write}});
//   q.finish();
//   rt.transfer.download(c, std::as_writable_bytes(std::span(out)));
//
// Destroy queues, programs and buffers before the runtime.
#pragma once
#include <vkgrad/vk/allocator.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/instance.hpp>
#include <vkgrad/vk/transfer.hpp>

namespace vkg::vk {

struct RuntimeOptions {
  InstanceOptions instance = InstanceOptions::from_env();
  DeviceOptions device = DeviceOptions::from_env();
  AllocatorOptions allocator = AllocatorOptions::from_env();
  TransferOptions transfer;
};

class Runtime {
 public:
  Runtime() : Runtime(RuntimeOptions{}) {}
  explicit Runtime(const RuntimeOptions& options)
      : instance(options.instance),
        device(instance, options.device),
        allocator(device, options.allocator),
        transfer(device, allocator, options.transfer) {}

  Instance instance;
  Device device;
  Allocator allocator;
  Transfer transfer;
};

}  // namespace vkg::vk
