// Compiled kernels by scheduled AST: the AST is hash-consed, so an equal kernel built again is
// the same node and finds its compiled form here. Buffer sizes are part of the key because the
// program records them, and so are the settings that change which opts get_program applies
// (a kernel compiled under NOOPT=1 or BEAM=n must not be reused once it is unset, and the
// reverse).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

template <class Compiled>
class KernelCache {
 public:
  // The compiled kernel of `item`, made by make() on a miss. make() runs outside the lock, so
  // several threads compile different kernels at once (Device::prepare); when two race to make
  // the same one, the first to finish is kept.
  template <class Make>
  Compiled& get(const ScheduleItem& item, const RunOptions& options, Make&& make) {
    Key key = key_of(item, options);
    if (Compiled* found = find(key)) return *found;
    auto made = std::make_unique<Compiled>(make());
    std::lock_guard lock(mu_);
    auto it = entries_.try_emplace(std::move(key), Entry{item.ast, std::move(made)}).first;
    return *it->second.compiled;
  }
  bool contains(const ScheduleItem& item, const RunOptions& options) {
    return find(key_of(item, options)) != nullptr;
  }

 private:
  using Key = std::pair<const UOp*, std::vector<int64_t>>;
  struct Entry {
    UOpPtr ast;  // keeps the key's node alive, so its address is never reused by another AST
    std::unique_ptr<Compiled> compiled;
  };
  static Key key_of(const ScheduleItem& item, const RunOptions& options) {
    std::vector<int64_t> variant{options.noopt, options.beam};  // then the buffer sizes
    for (const auto& b : item.buffers) variant.push_back(b->count());
    return Key{item.ast.get(), std::move(variant)};
  }
  Compiled* find(const Key& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second.compiled.get();
  }
  std::mutex mu_;
  std::map<Key, Entry> entries_;
};

}  // namespace vkg
