// Copy items: a COPY node (Tensor::to) is realized by moving bytes from one device's buffer into
// another's, not by a kernel. The scheduler makes them (a ScheduleItem whose ast is a COPY node,
// buffers {destination, source}, both whole buffers in row-major order), and the realize engine
// runs them between the kernels of the two devices, in schedule order.
#pragma once
#include <memory>
#include <string>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// The item copying all of `src` into `dst` (same dtype and count, any two devices).
ScheduleItem copy_item(std::shared_ptr<const Buffer> dst, std::shared_ptr<const Buffer> src);
inline bool is_copy(const ScheduleItem& item) { return item.ast->op == Ops::COPY; }

// Runs a copy item: its source device has finished what writes the source, and its destination
// device what reads the destination's memory before (the realize engine waits for both). Within
// one device, the device's own queued copy; between two, through host memory. Returns the
// DEBUG=2 line: "copy N, VK:1 <- VK" with the host time it took.
RunStat run_copy(const ScheduleItem& item, Allocation& dst, Allocation& src);

}  // namespace vkg
