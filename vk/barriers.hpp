// The few pipeline barriers the runtime records, as data. Kernels reach memory through device
// addresses, not bound buffers, so a VkBufferMemoryBarrier would name nothing the shader uses;
// every barrier is a global VkMemoryBarrier2, and hazards.hpp decides where one is needed.
#pragma once
#include <vulkan/vulkan.h>

#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

struct BarrierKind {
  VkPipelineStageFlags2 src_stages;
  VkAccessFlags2 src_access;
  VkPipelineStageFlags2 dst_stages;
  VkAccessFlags2 dst_access;
};

// The stages and accesses a queue's commands use: dispatches, and copies and fills.
inline constexpr VkPipelineStageFlags2 kWorkStages =
    VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT;
inline constexpr VkAccessFlags2 kWorkWrites =
    VK_ACCESS_2_SHADER_WRITE_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT;
inline constexpr VkAccessFlags2 kWorkAccess = VK_ACCESS_2_SHADER_READ_BIT |
                                              VK_ACCESS_2_SHADER_WRITE_BIT |
                                              VK_ACCESS_2_TRANSFER_READ_BIT | kWorkWrites;

// A later command reads or writes what an earlier one wrote (RAW, WAW).
inline constexpr BarrierKind kMemoryHazard{kWorkStages, kWorkWrites, kWorkStages, kWorkAccess};
// A later command overwrites what an earlier one only read (WAR): ordering suffices.
inline constexpr BarrierKind kExecutionHazard{kWorkStages, 0, kWorkStages, 0};
// First in every submission: orders it after all earlier submissions to the queue, which
// submission order alone does not do.
inline constexpr BarrierKind kSubmissionStart = kMemoryHazard;
// First in a submission that waits on a semaphore (Queue::wait_before_next): the host may write
// memory such a batch reads after vkQueueSubmit (a copy between devices fills stage_in's staging
// buffer, then signals the bridge the batch waits on). vkQueueSubmit's implicit host-write
// visibility covers only writes made before it, and a semaphore signal from the host is an
// execution dependency: a barrier from the host stage makes those writes available and visible
// (the memory is host-coherent, so no flush is needed). One more stage bit in the barrier every
// batch starts with, not another barrier.
inline constexpr BarrierKind kSubmissionStartAfterHost{kWorkStages | VK_PIPELINE_STAGE_2_HOST_BIT,
                                                       kWorkWrites | VK_ACCESS_2_HOST_WRITE_BIT,
                                                       kWorkStages, kWorkAccess};
// Last in every submission: makes its writes visible to the host once its point has completed.
inline constexpr BarrierKind kSubmissionEnd{kWorkStages, kWorkWrites, VK_PIPELINE_STAGE_2_HOST_BIT,
                                            VK_ACCESS_2_HOST_READ_BIT | VK_ACCESS_2_HOST_WRITE_BIT};

// The same for a submission to a copy engine's queue, whose commands are copies only (it
// supports no compute stage).
inline constexpr BarrierKind kCopyQueueStart{
    VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT,
    VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT,
    VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT};
// First in a copy-engine submission that waits on a semaphore the host signals (a copy between
// devices into this device: the host fills the staging memory after the copy was submitted), as
// kSubmissionStartAfterHost for the compute queue.
inline constexpr BarrierKind kCopyQueueStartAfterHost{
    VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT | VK_PIPELINE_STAGE_2_HOST_BIT,
    VK_ACCESS_2_TRANSFER_WRITE_BIT | VK_ACCESS_2_HOST_WRITE_BIT,
    VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT,
    VK_ACCESS_2_TRANSFER_READ_BIT | VK_ACCESS_2_TRANSFER_WRITE_BIT};
inline constexpr BarrierKind kCopyQueueEnd{
    VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT, VK_ACCESS_2_TRANSFER_WRITE_BIT,
    VK_PIPELINE_STAGE_2_HOST_BIT, VK_ACCESS_2_HOST_READ_BIT | VK_ACCESS_2_HOST_WRITE_BIT};

inline void record_barrier(VkCommandBuffer cmd, const BarrierKind& kind) {
  VkMemoryBarrier2 barrier = structure<VkMemoryBarrier2>(VK_STRUCTURE_TYPE_MEMORY_BARRIER_2);
  barrier.srcStageMask = kind.src_stages;
  barrier.srcAccessMask = kind.src_access;
  barrier.dstStageMask = kind.dst_stages;
  barrier.dstAccessMask = kind.dst_access;
  VkDependencyInfo dep = structure<VkDependencyInfo>(VK_STRUCTURE_TYPE_DEPENDENCY_INFO);
  dep.memoryBarrierCount = 1;
  dep.pMemoryBarriers = &barrier;
  vkCmdPipelineBarrier2(cmd, &dep);
}

}  // namespace vkg::vk
