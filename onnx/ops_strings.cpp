// Operators on string tensors, which live on the host (onnx::Strings): StringNormalizer, and
// Cast between strings and numbers.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
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

// numpy's str() of a float: shortest round-trip digits, "1.0" rather than "1", nan and inf.
template <class F>
std::string number_string(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

Value cast_strings(OpContext& c, const Value& v, std::optional<DType> to) {
  if (!to) {
    if (v.is_strings()) return v;
    const Tensor& t = v.tensor();
    Strings out{t.shape(), {}};
    const std::vector<double> x = host_doubles(t);
    for (double e : x) {
      if (t.dtype() == dtypes::float32 || t.dtype() == dtypes::float16)
        out.values.push_back(number_string(float(e)));
      else if (t.dtype().is_float())
        out.values.push_back(number_string(e));
      else if (t.dtype().is_bool())
        out.values.push_back(e != 0 ? "True" : "False");
      else
        out.values.push_back(std::to_string(int64_t(e)));
    }
    return Value(out);
  }
  const Strings& in = v.strings();
  std::vector<double> x;
  for (const auto& str : in.values) {
    char* end = nullptr;
    const double e = std::strtod(str.c_str(), &end);
    if (end == str.c_str()) c.fail("cannot read '" + str + "' as a number");
    x.push_back(e);
  }
  if (*to == dtypes::float32)
    return Value(Tensor(std::vector<float>(x.begin(), x.end()), in.shape, c.device()));
  return Value(Tensor(x, in.shape, c.device()).cast(*to));
}

void add_string_ops(OpTable& t) { t["StringNormalizer"] = string_normalizer; }

}  // namespace vkg::onnx
