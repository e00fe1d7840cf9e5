#include <vkgrad/core/copy_item.hpp>

#include <chrono>
#include <vector>

#include <vkgrad/core/error.hpp>

namespace vkg {

ScheduleItem copy_item(std::shared_ptr<const Buffer> dst, std::shared_ptr<const Buffer> src) {
  if (dst->dtype() != src->dtype() || dst->count() != src->count())
    throw Error("copy: " + src->repr() + " into " + dst->repr() + " (internal: they must match)");
  ScheduleItem item;
  item.ast = UOp::make(Ops::COPY, dst->dtype(), {}, int64_t(dst->nbytes()));
  item.buffers = {std::move(dst), std::move(src)};
  return item;
}

RunStat run_copy(const ScheduleItem& item, Allocation& dst, Allocation& src) {
  const Buffer& to = *item.buffers[0];
  const Buffer& from = *item.buffers[1];
  Device& to_dev = device(to.device());
  Device& from_dev = device(from.device());
  const auto t0 = std::chrono::steady_clock::now();
  if (&to_dev == &from_dev) {
    to_dev.copy(src, dst, to.nbytes());
  } else {
    // Two devices share no memory (two Vulkan logical devices cannot, even on one physical
    // device): the bytes go through the host.
    std::vector<std::byte> host(from.nbytes());
    from_dev.copy_out(src, host);
    to_dev.copy_in(dst, host);
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return RunStat{"copy " + std::to_string(to.nbytes()) + ", " + to_dev.name() + " <- " +
                     from_dev.name(),
                 2, int64_t(to.nbytes()), 0, ns};
}

}  // namespace vkg
