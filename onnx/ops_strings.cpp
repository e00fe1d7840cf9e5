// Operators on string tensors, which live on the host (onnx::Strings): StringNormalizer.
#include <algorithm>
#include <cctype>
#include <set>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  return s;
}
std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return char(std::toupper(ch)); });
  return s;
}

// StringNormalizer: drops stopwords (case-insensitively unless is_case_sensitive), then changes
// case. Input (C) or (1, C); an input left empty becomes one empty string, as ONNX specifies.
std::vector<Value> string_normalizer(OpContext& c) {
  const Strings& in = c.value(0).strings();
  const std::string action = c.attr_s("case_change_action", "NONE");
  const bool sensitive = c.attr_i("is_case_sensitive", 0) != 0;
  const std::string locale = c.attr_s("locale", "en_US");
  if (locale != "en_US" && locale != "C" && !locale.empty())
    c.unsupported("locale '" + locale + "'");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    c.fail("case_change_action must be NONE, LOWER or UPPER");
  std::set<std::string> stop;
  if (const auto* a = c.attr("stopwords"))
    for (const auto& w : a->strings()) stop.insert(sensitive ? w : lower(w));
  if (!(in.shape.size() == 1 || (in.shape.size() == 2 && in.shape[0] == 1)))
    c.fail("input must be (C) or (1, C)");
  Strings out;
  for (const auto& w : in.values) {
    if (stop.count(sensitive ? w : lower(w))) continue;
    out.values.push_back(action == "LOWER" ? lower(w) : action == "UPPER" ? upper(w) : w);
  }
  if (out.values.empty()) out.values.push_back("");
  const int64_t n = int64_t(out.values.size());
  out.shape = in.shape.size() == 1 ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n};
  return {Value(out)};
}

}  // namespace

void add_string_ops(OpTable& t) { t["StringNormalizer"] = string_normalizer; }

}  // namespace vkg::onnx
