// Copy items: a COPY node (Tensor::to) is realized by moving bytes from one device's buffer into
// another's, not by a kernel. The scheduler makes them (a ScheduleItem whose ast is a COPY node,
// buffers {destination, source}, both whole buffers in row-major order), and the realize engine
// runs them between the kernels of the two devices, in schedule order.
#pragma once
#include <functional>
#include <future>
#include <memory>
#include <string>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// The item copying all of `src` into `dst` (same dtype and count, any two devices).
ScheduleItem copy_item(std::shared_ptr<const Buffer> dst, std::shared_ptr<const Buffer> src);
inline bool is_copy(const ScheduleItem& item) { return item.ast->op == Ops::COPY; }

// Runs a copy item after everything queued before it, without the host waiting where it can:
//  - within one device, the device's own queued copy (Device::copy);
//  - between two devices whose memories the host maps (Lavapipe, unified memory, the CPU
//    device), a memcpy on a copy thread once both devices have finished what they queued
//    before that uses the two buffers (the source's writers, and earlier users of the
//    destination's memory, which the memory planner may have lent: Device::when_done_with);
//    later work on both devices waits for it on their queues (Device::wait_for), the host does
//    not. The CPU device runs its items on the host, so it waits there;
//  - where a side's memory is not mapped (a discrete GPU's device-local memory), the same through
//    staging memory (Device::stage_out, stage_in): the source's queue copies it into staging
//    memory after its writers, the copy thread copies that into the destination (or into the
//    destination's staging memory, which its queue copies in once the thread is done), chunk by
//    chunk so that the three copies overlap. No side waits on the realizing thread, except the
//    CPU device's;
//  - where a side's memory is not mapped but its device can import host memory
//    (VK_EXT_external_memory_host), through the host bridge instead of staging memory on that
//    side (core/host_bridge.hpp: page-aligned host memory each device imports once): its queue
//    copies the source into the bridge's slots, or the slots into the destination, slot by slot
//    as the copy thread passes on that the other side has filled or emptied one (Device::
//    bridge_out, bridge_in). Between two such devices there is no host memcpy at all; beside
//    mapped or CPU memory the copy thread copies between that and the slots;
//  - where a device can stage nothing, through host memory with the host waiting: `settle(device)`
//    waits for the two devices first (the realize engine's, which also prints what they ran), then
//    copy_out and copy_in.
// Returns the DEBUG=2 line, "copy N, VK:1 <- VK", ready once the copy is done (its time is the
// copy's own, waits excluded); its get() throws what the copy met (a lost device).
// The copy thread keeps `dst` and `src` alive until it has copied.
std::shared_future<RunStat> run_copy(const ScheduleItem& item, std::shared_ptr<Allocation> dst,
                                     std::shared_ptr<Allocation> src,
                                     const std::function<void(Device&)>& settle);

}  // namespace vkg
