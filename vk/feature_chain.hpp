// The VkPhysicalDeviceFeatures2 chain (core, 1.1, 1.2 and 1.3 structs), used twice: to read what a
// device supports and to say what vkgrad enables. Internal to vk/.
#pragma once
#include <vulkan/vulkan.h>

#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

struct FeatureChain {
  VkPhysicalDeviceFeatures2 core =
      structure<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  VkPhysicalDeviceVulkan11Features v11 = structure<VkPhysicalDeviceVulkan11Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  VkPhysicalDeviceVulkan12Features v12 = structure<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  VkPhysicalDeviceVulkan13Features v13 = structure<VkPhysicalDeviceVulkan13Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);

  FeatureChain() {
    core.pNext = &v11;
    v11.pNext = &v12;
    v12.pNext = &v13;
  }
  FeatureChain(const FeatureChain&) = delete;  // the pNext pointers point into this object
  FeatureChain& operator=(const FeatureChain&) = delete;

  void query(VkPhysicalDevice physical) { vkGetPhysicalDeviceFeatures2(physical, &core); }

  // Sets every feature vkgrad uses that `supported` has: the required ones (device addresses,
  // timeline semaphores, synchronization2) and the optional ones the renderer may use. Nothing
  // else: features like robustBufferAccess cost speed and we do not want them on.
  void enable_used(const FeatureChain& supported);
};

// The features vkgrad turns on when the device has them, as data: one table per struct.
inline constexpr VkBool32 VkPhysicalDeviceFeatures::*kUsedCore[] = {
    &VkPhysicalDeviceFeatures::shaderInt64,
    &VkPhysicalDeviceFeatures::shaderInt16,
    &VkPhysicalDeviceFeatures::shaderFloat64,
};
inline constexpr VkBool32 VkPhysicalDeviceVulkan11Features::*kUsed11[] = {
    &VkPhysicalDeviceVulkan11Features::storageBuffer16BitAccess,
    &VkPhysicalDeviceVulkan11Features::uniformAndStorageBuffer16BitAccess,
    &VkPhysicalDeviceVulkan11Features::storagePushConstant16,
};
inline constexpr VkBool32 VkPhysicalDeviceVulkan12Features::*kUsed12[] = {
    &VkPhysicalDeviceVulkan12Features::storageBuffer8BitAccess,
    &VkPhysicalDeviceVulkan12Features::uniformAndStorageBuffer8BitAccess,
    &VkPhysicalDeviceVulkan12Features::storagePushConstant8,
    &VkPhysicalDeviceVulkan12Features::shaderFloat16,
    &VkPhysicalDeviceVulkan12Features::shaderInt8,
    &VkPhysicalDeviceVulkan12Features::shaderBufferInt64Atomics,
    &VkPhysicalDeviceVulkan12Features::shaderSharedInt64Atomics,
    &VkPhysicalDeviceVulkan12Features::scalarBlockLayout,
    &VkPhysicalDeviceVulkan12Features::vulkanMemoryModel,
    &VkPhysicalDeviceVulkan12Features::vulkanMemoryModelDeviceScope,
    &VkPhysicalDeviceVulkan12Features::shaderSubgroupExtendedTypes,
    &VkPhysicalDeviceVulkan12Features::uniformBufferStandardLayout,
    &VkPhysicalDeviceVulkan12Features::hostQueryReset,
    &VkPhysicalDeviceVulkan12Features::timelineSemaphore,
    &VkPhysicalDeviceVulkan12Features::bufferDeviceAddress,
};
inline constexpr VkBool32 VkPhysicalDeviceVulkan13Features::*kUsed13[] = {
    &VkPhysicalDeviceVulkan13Features::synchronization2,
    &VkPhysicalDeviceVulkan13Features::subgroupSizeControl,
    &VkPhysicalDeviceVulkan13Features::computeFullSubgroups,
    &VkPhysicalDeviceVulkan13Features::maintenance4,
    &VkPhysicalDeviceVulkan13Features::shaderIntegerDotProduct,
};

inline void FeatureChain::enable_used(const FeatureChain& supported) {
  for (auto f : kUsedCore) core.features.*f = supported.core.features.*f;
  for (auto f : kUsed11) v11.*f = supported.v11.*f;
  for (auto f : kUsed12) v12.*f = supported.v12.*f;
  for (auto f : kUsed13) v13.*f = supported.v13.*f;
}

}  // namespace vkg::vk
