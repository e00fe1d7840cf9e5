// HostImport (vk/host_import.hpp): host memory at an address and of a size that are not multiples
// of minImportedHostPointerAlignment (a page on Lavapipe) is imported as a buffer whose range
// starts at the bytes asked for; the queue copies out of it and into it, touching nothing around
// them. What copies between devices read another device's memory through (VK_EXT_external_
// memory_host; VKG_NO_HOST_IMPORT=1 turns it off, and make() then gives nullptr).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <vkgrad/vk/host_import.hpp>

#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

TEST(VkHostImport, CopiesOutOfAndIntoUnalignedHostBytesOnly) {
  Runtime& rt = test::vk_runtime();
  const Capabilities& caps = rt.device.caps();
  if (!caps.features.external_memory_host) {
    EXPECT_EQ(HostImport::make(rt.device, reinterpret_cast<const std::byte*>(&caps), 4), nullptr);
    GTEST_SKIP() << "VK_EXT_external_memory_host is not enabled on " << caps.name;
  }
  const size_t align = caps.limits.min_imported_host_pointer_alignment;
  // The bytes start 12 bytes into a page and end inside another, so the import covers whole
  // pages around them, with host memory before and after that must keep its values.
  constexpr size_t kWords = 5001;
  std::vector<uint32_t> host(kWords + 2 * align / 4 + 64, 0xdeadbeefu);
  auto* page = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(host.data()) + align - 1) &
                                            ~uintptr_t(align - 1));
  ASSERT_LE(page + 12 + kWords * 4, reinterpret_cast<std::byte*>(host.data() + host.size()));
  auto* words = reinterpret_cast<uint32_t*>(page + 12);
  for (uint32_t i = 0; i < kWords; ++i) words[i] = i * 2654435761u;
  std::unique_ptr<HostImport> imported =
      HostImport::make(rt.device, reinterpret_cast<std::byte*>(words), kWords * 4);
  ASSERT_NE(imported, nullptr);
  EXPECT_EQ(imported->offset() % align, 12u);
  EXPECT_EQ(imported->size(), kWords * 4);

  Buffer dst = rt.allocator.allocate(kWords * 4);
  uint64_t point = rt.transfer.queue_copy(*imported, 0, dst, 0, kWords * 4, {}, true);
  rt.transfer.timeline().wait(point);
  std::vector<uint32_t> back(kWords);
  rt.transfer.download(dst, std::as_writable_bytes(std::span(back)));
  EXPECT_EQ(back, std::vector<uint32_t>(words, words + kWords));

  // Into it: words 1 to kWords - 2 become dst's words 0 to kWords - 3; word 0, the last word and
  // the bytes around the range keep their values.
  const std::vector<uint32_t> before(host);
  point = rt.transfer.queue_copy(dst, 0, *imported, 4, kWords * 4 - 8, {}, false);
  rt.transfer.timeline().wait(point);
  for (size_t i = 0; i < host.size(); ++i) {
    const auto* at = reinterpret_cast<const std::byte*>(&host[i]);
    const bool inside = at >= reinterpret_cast<std::byte*>(words + 1) &&
                        at < reinterpret_cast<std::byte*>(words + kWords - 1);
    if (!inside) ASSERT_EQ(host[i], before[i]) << "word " << i << " outside the range changed";
  }
  for (size_t i = 1; i + 1 < kWords; ++i)
    ASSERT_EQ(words[i], uint32_t(i - 1) * 2654435761u) << "word " << i;
}

}  // namespace
}  // namespace vkg::vk
