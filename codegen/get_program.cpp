#include <vkgrad/codegen/get_program.hpp>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/context.hpp>

namespace vkg {

Program get_program(const ScheduleItem& item, const DeviceTraits& traits) {
  const int debug = int(setting("DEBUG"));
  if (debug >= 5) std::printf("%s\n", to_string(item.ast).c_str());
  Kernel k(item.ast);
  if (!setting("NOOPT")) apply_heuristics(k, traits);
  std::vector<int64_t> counts;
  for (const auto& b : item.buffers) counts.push_back(b->count());
  const int64_t wg = k.has_reduce() ? traits.default_workgroup : traits.elementwise_workgroup;
  Program p = lower(k, counts, LowerOptions{std::min(wg, traits.max_workgroup_invocations)});
  if (debug >= 3) std::printf("%s %s\n", p.name.c_str(), k.describe().c_str());
  if (debug >= 5) std::printf("%s", to_string(p).c_str());
  return p;
}

std::string to_string(const Program& program) {
  std::unordered_map<const UOp*, size_t> index;
  std::string out;
  char line[512];
  for (size_t i = 0; i < program.uops.size(); ++i) {
    const UOp* u = program.uops[i].get();
    index[u] = i;
    std::string src = "[";
    for (size_t j = 0; j < u->src.size(); ++j) {
      auto it = index.find(u->src[j].get());
      src += (j ? ", " : "") + (it != index.end() ? std::to_string(it->second) : arg_repr(u->src[j]->arg));
    }
    src += "]";
    std::snprintf(line, sizeof line, "%4zu %-14s: %-14s %-32s %s\n", i, std::string(op_name(u->op)).c_str(),
                  u->dtype.name().c_str(), src.c_str(), arg_repr(u->arg).c_str());
    out += line;
  }
  return out;
}

}  // namespace vkg
