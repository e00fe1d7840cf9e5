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
  template <class Make>
  Compiled& get(const ScheduleItem& item, const RunOptions& options, Make&& make) {
    std::vector<int64_t> variant{options.noopt, options.beam};  // then the buffer sizes
    for (const auto& b : item.buffers) variant.push_back(b->count());
    std::lock_guard lock(mu_);
    auto key = std::pair{item.ast.get(), std::move(variant)};
    auto it = entries_.find(key);
    if (it == entries_.end())
      it = entries_.emplace(std::move(key), Entry{item.ast, std::make_unique<Compiled>(make())}).first;
    return *it->second.compiled;
  }

 private:
  struct Entry {
    UOpPtr ast;  // keeps the key's node alive, so its address is never reused by another AST
    std::unique_ptr<Compiled> compiled;
  };
  std::mutex mu_;
  std::map<std::pair<const UOp*, std::vector<int64_t>>, Entry> entries_;
};

}  // namespace vkg
