// Compiled kernels by scheduled AST: the AST is hash-consed, so an equal kernel built again is
// the same node and finds its compiled form here. Buffer sizes are part of the key because the
// program records them, and so are the settings that change which opts get_program applies
// (a kernel compiled under NOOPT=1 or BEAM=n must not be reused once it is unset, and the
// reverse).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// Bounded: past `capacity` entries, trim() drops the least recently used down to three quarters
// of it. Entries are shared, so a kernel something still holds (a JIT's recording) outlives its
// entry. Call trim() only where nothing being recorded uses a kernel it may drop (the Vulkan
// adapter calls it before compiling a schedule, when its queue is idle).
template <class Compiled>
class KernelCache {
 public:
  // `bind_limit`: the most bytes a buffer may have to be bound by descriptor (the device's
  // maxStorageBufferRange; 0 where that never matters); `texel_limit`: the most elements a
  // buffer may have to be read through a texel view (maxTexelBufferElements; 0 where kernels
  // read no texel views). See key_of.
  explicit KernelCache(size_t capacity = 4096, uint64_t bind_limit = 0, uint64_t texel_limit = 0)
      : capacity_(capacity), bind_limit_(bind_limit), texel_limit_(texel_limit) {}

  // The compiled kernel of `item`, made by make() on a miss. make() runs outside the lock, so
  // several threads compile different kernels at once (Device::prepare); when two race to make
  // the same one, the first to finish is kept.
  template <class Make>
  std::shared_ptr<Compiled> get(const ScheduleItem& item, const RunOptions& options, Make&& make) {
    Key key = key_of(item, options);
    if (std::shared_ptr<Compiled> found = find(key)) return found;
    auto made = std::make_shared<Compiled>(make());
    std::lock_guard lock(mu_);
    auto it = entries_.try_emplace(std::move(key), Entry{item.ast, std::move(made), 0}).first;
    it->second.last_use = ++tick_;
    return it->second.compiled;
  }
  bool contains(const ScheduleItem& item, const RunOptions& options) {
    return find(key_of(item, options)) != nullptr;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return entries_.size();
  }
  void trim() {
    std::lock_guard lock(mu_);
    if (entries_.size() <= capacity_) return;
    std::vector<uint64_t> uses;
    for (const auto& [key, e] : entries_) uses.push_back(e.last_use);
    const size_t drop = entries_.size() - capacity_ * 3 / 4;
    std::nth_element(uses.begin(), uses.begin() + ptrdiff_t(drop - 1), uses.end());
    const uint64_t newest_dropped = uses[drop - 1];
    std::erase_if(entries_, [&](const auto& kv) { return kv.second.last_use <= newest_dropped; });
  }

 private:
  using Key = std::pair<const UOp*, std::vector<int64_t>>;
  struct Entry {
    UOpPtr ast;  // keeps the key's node alive, so its address is never reused by another AST
    std::shared_ptr<Compiled> compiled;
    uint64_t last_use;
  };
  Key key_of(const ScheduleItem& item, const RunOptions& options) const {
    std::vector<int64_t> variant{options.noopt, options.beam, options.no_float16,
                                 options.no_storage16};  // then the buffer sizes
    // A kernel over symbolic sizes serves every binding, whose buffers differ in size: it is
    // keyed by its AST, by whether some buffer is too large to bind by descriptor, and by which
    // buffers are too large for a texel view (its program records the memory of the first run's
    // buffers, which only decides those; see arg_layout): a binding with a larger buffer never
    // meets a kernel that binds it by descriptor or reads it through a view.
    if (!item.var_vals.empty()) {
      bool too_large = false;
      for (const auto& b : item.buffers)
        too_large = too_large || (bind_limit_ && b->capacity_bytes() > bind_limit_);
      variant.push_back(too_large);
      for (const auto& b : item.buffers)
        variant.push_back(texel_limit_ && uint64_t(b->capacity()) > texel_limit_);
      return Key{item.ast.get(), std::move(variant)};
    }
    for (const auto& b : item.buffers) variant.push_back(b->count());
    return Key{item.ast.get(), std::move(variant)};
  }
  std::shared_ptr<Compiled> find(const Key& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    it->second.last_use = ++tick_;
    return it->second.compiled;
  }
  size_t capacity_;
  uint64_t bind_limit_;
  uint64_t texel_limit_;
  uint64_t tick_ = 0;
  std::mutex mu_;
  std::map<Key, Entry> entries_;
};

}  // namespace vkg
