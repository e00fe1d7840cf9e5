#include <vkgrad/codegen/spirv_execution_modes.hpp>

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace vkg {

namespace {

constexpr size_t kHeaderWords = 5;
constexpr uint32_t kOpExecutionMode = 16;

// The (mode, operand) pairs of the GLSL's `spirv_execution_mode(capabilities = [...], m, n);`.
std::vector<std::pair<uint32_t, uint32_t>> declared_modes(std::string_view glsl) {
  std::vector<std::pair<uint32_t, uint32_t>> modes;
  constexpr std::string_view kCall = "spirv_execution_mode(";
  for (size_t at = glsl.find(kCall); at != std::string_view::npos; at = glsl.find(kCall, at + 1)) {
    const size_t close = glsl.find(')', at);
    const size_t list_end = glsl.find(']', at);
    if (close == std::string_view::npos || list_end == std::string_view::npos || list_end > close)
      continue;
    uint32_t values[2];
    size_t p = list_end + 1;
    bool ok = true;
    for (uint32_t& v : values) {
      p = glsl.find_first_of("0123456789", p);
      if (p == std::string_view::npos || p > close) {
        ok = false;
        break;
      }
      p = size_t(std::from_chars(glsl.data() + p, glsl.data() + close, v).ptr - glsl.data());
    }
    if (ok && glsl.find_first_of("0123456789", p) > close) modes.emplace_back(values[0], values[1]);
  }
  return modes;
}

}  // namespace

std::vector<uint32_t> with_declared_execution_modes(std::vector<uint32_t> module,
                                                    std::string_view glsl) {
  const auto wanted = declared_modes(glsl);
  if (wanted.empty() || module.size() <= kHeaderWords) return module;
  for (const auto& [mode, operand] : wanted) {
    size_t first = 0;  // the first OpExecutionMode of `mode`, where the missing one goes after
    bool present = false;
    for (size_t i = kHeaderWords; i < module.size();) {
      const uint32_t count = module[i] >> 16, opcode = module[i] & 0xffffu;
      if (count == 0 || i + count > module.size()) return module;  // not a module we can walk
      if (opcode == kOpExecutionMode && count == 4 && module[i + 2] == mode) {
        if (!first) first = i;
        present = present || module[i + 3] == operand;
      }
      i += count;
    }
    if (present || !first) continue;
    const uint32_t entry = module[first + 1];
    const uint32_t added[] = {(4u << 16) | kOpExecutionMode, entry, mode, operand};
    module.insert(module.begin() + std::ptrdiff_t(first + 4), std::begin(added), std::end(added));
  }
  return module;
}

std::vector<uint32_t> with_no_contraction(std::vector<uint32_t> module) {
  constexpr uint32_t kOpDecorate = 71, kNoContraction = 42;
  constexpr uint32_t kFloatArithmetic[] = {129, 131, 133, 142};  // FAdd FSub FMul VectorTimesScalar
  if (module.size() <= kHeaderWords) return module;
  std::vector<uint32_t> results;
  std::set<uint32_t> decorated;
  size_t annotations = 0, declarations = 0;  // where the first of each section starts
  for (size_t i = kHeaderWords; i < module.size();) {
    const uint32_t count = module[i] >> 16, opcode = module[i] & 0xffffu;
    if (count == 0 || i + count > module.size()) return module;  // not a module we can walk
    const bool annotation = (opcode >= 71 && opcode <= 75) || opcode == 332 || opcode == 5632 ||
                            opcode == 5633;  // OpDecorate..OpGroupMemberDecorate, Id, String
    if (annotation && !annotations) annotations = i;
    if (!declarations && ((opcode >= 19 && opcode <= 39) || (opcode >= 41 && opcode <= 52) ||
                          opcode == 59))  // types, constants, variables
      declarations = i;
    if (opcode == kOpDecorate && count == 3 && module[i + 2] == kNoContraction)
      decorated.insert(module[i + 1]);
    if (count >= 4 && std::find(std::begin(kFloatArithmetic), std::end(kFloatArithmetic), opcode) !=
                          std::end(kFloatArithmetic))
      results.push_back(module[i + 2]);
    i += count;
  }
  const size_t at = annotations ? annotations : declarations;
  if (!at) return module;
  std::vector<uint32_t> added;
  for (const uint32_t id : results)
    if (decorated.insert(id).second)
      added.insert(added.end(), {(3u << 16) | kOpDecorate, id, kNoContraction});
  module.insert(module.begin() + std::ptrdiff_t(at), added.begin(), added.end());
  return module;
}

}  // namespace vkg
