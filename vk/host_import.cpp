#include <vkgrad/vk/host_import.hpp>

#include <bit>
#include <cstdint>

#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

std::unique_ptr<HostImport> HostImport::make(Device& device, const std::byte* p, size_t bytes) {
  const Capabilities& caps = device.caps();
  const VkDeviceSize align = caps.limits.min_imported_host_pointer_alignment;
  if (!caps.features.external_memory_host || !p || bytes == 0 || !std::has_single_bit(align))
    return nullptr;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = at & ~uintptr_t(align - 1);
  const VkDeviceSize size = (at + bytes - start + align - 1) & ~(align - 1);
  if (size > caps.limits.max_buffer_size || size > caps.limits.max_memory_allocation_size)
    return nullptr;
  void* host = reinterpret_cast<void*>(start);  // the import's API takes a non-const pointer
  constexpr auto kType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkDevice dev = device.get();

  VkMemoryHostPointerPropertiesEXT allowed = structure<VkMemoryHostPointerPropertiesEXT>(
      VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT);
  if (device.host_pointer_properties()(dev, kType, host, &allowed) != VK_SUCCESS) return nullptr;

  VkExternalMemoryBufferCreateInfo external = structure<VkExternalMemoryBufferCreateInfo>(
      VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO);
  external.handleTypes = kType;
  VkBufferCreateInfo info = structure<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.pNext = &external;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Used by one queue family only: the copy engine's where copies run there, else the compute
  // queue's (vk/transfer.hpp).
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer;
  if (vkCreateBuffer(dev, &info, nullptr, &buffer) != VK_SUCCESS) return nullptr;
  std::unique_ptr<HostImport> out(new HostImport());
  out->buffer_ = UniqueBuffer(dev, buffer);

  VkMemoryRequirements reqs;
  vkGetBufferMemoryRequirements(dev, buffer, &reqs);
  if (reqs.size > size) return nullptr;  // the buffer wants more than the host range holds
  // Host-coherent only: the other side's writes reach this device through the host (its end
  // barrier makes them available there, this side's start barrier visible), with no flush.
  constexpr VkMemoryPropertyFlags kCoherent =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  for (uint32_t i = 0; i < caps.memory_types.size(); ++i)
    if ((allowed.memoryTypeBits & reqs.memoryTypeBits & (1u << i)) &&
        (caps.memory_types[i].flags & kCoherent) == kCoherent) {
      type = int(i);
      break;
    }
  if (type < 0) return nullptr;

  VkImportMemoryHostPointerInfoEXT import = structure<VkImportMemoryHostPointerInfoEXT>(
      VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT);
  import.handleType = kType;
  import.pHostPointer = host;
  VkMemoryAllocateInfo alloc =
      structure<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  alloc.pNext = &import;
  alloc.allocationSize = size;
  alloc.memoryTypeIndex = uint32_t(type);
  VkDeviceMemory memory;
  if (vkAllocateMemory(dev, &alloc, nullptr, &memory) != VK_SUCCESS) return nullptr;
  out->memory_ = UniqueMemory(dev, memory);
  if (vkBindBufferMemory(dev, buffer, memory, 0) != VK_SUCCESS) return nullptr;
  out->offset_ = at - start;
  out->bytes_ = bytes;
  return out;
}

}  // namespace vkg::vk
