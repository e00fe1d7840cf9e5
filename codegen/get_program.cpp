#include <vkgrad/codegen/get_program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <unordered_map>

#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

Program get_program(const ScheduleItem& item, const DeviceTraits& traits, const RunOptions& options,
                    const std::vector<Opt>* opts) {
  if (options.debug >= 5) std::printf("%s\n", to_string(item.ast).c_str());
  Kernel k(item.ast);
  for (const Opt& o : opts ? *opts : default_opts(k, traits, options)) k.apply(o);
  Program p = lower_kernel(k, buffer_counts(item), traits);
  if (options.debug >= 3) std::printf("%s %s\n", p.name.c_str(), k.describe().c_str());
  if (options.debug >= 5) std::printf("%s", to_string(p).c_str());
  return p;
}

std::vector<Opt> default_opts(const Kernel& kernel, const DeviceTraits& traits,
                              const RunOptions& options) {
  if (options.noopt) return {};
  Kernel k = kernel;
  // Symbolic kernels get registers on their plain axes only (their own heuristics).
  if (kernel.symbolic())
    apply_symbolic_heuristics(k, traits);
  else
    apply_heuristics(k, traits);
  return std::vector<Opt>(k.applied().begin() + std::ptrdiff_t(kernel.applied().size()),
                          k.applied().end());
}

Program lower_kernel(const Kernel& k, const std::vector<int64_t>& counts,
                     const DeviceTraits& traits) {
  const int64_t wg = k.has_reduce() ? traits.default_workgroup : traits.elementwise_workgroup;
  return lower(k, counts, LowerOptions{std::min(wg, traits.max_workgroup_invocations)});
}

std::vector<int64_t> buffer_counts(const ScheduleItem& item) {
  // A symbolic kernel's buffers by the memory they have (room for every binding, under a Jit's
  // capture): what decides whether they can be bound by descriptor.
  std::vector<int64_t> counts;
  for (const auto& b : item.buffers)
    counts.push_back(item.var_vals.empty() ? b->count() : b->capacity());
  return counts;
}

std::vector<int64_t> var_values(const Program& program, const ScheduleItem& item) {
  std::vector<int64_t> out;
  for (const VarArg& v : program.vars) {
    auto it = item.var_vals.find(v.name);
    if (it == item.var_vals.end())
      throw Error(
          "kernel '" + program.name + "' reads variable '" + v.name +
          "', which has no value in this run: bind it (Variable::bind) where the tensor is shaped");
    out.push_back(it->second);
  }
  return out;
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
