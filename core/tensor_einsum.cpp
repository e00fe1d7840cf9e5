// einsum, as tinygrad's: every operand is lined up on one order of all labels (the output's, then
// the summed ones), the operands are multiplied with broadcasting, and the summed labels are
// reduced. The compiler fuses that into one reduce kernel, as it does matmul. A label repeated
// within an operand takes its diagonal first ("ii->i"). "..." stands for the same broadcast
// dimensions in every operand, numpy's rules.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// A letter's label is its character; dimension k of the ellipsis (counted from its left end, the
// ellipsis right-aligned over all operands) is kEllipsis + k.
constexpr int kEllipsis = 1000;

[[noreturn]] void fail(std::string_view formula, const std::string& why) {
  throw Error("einsum(\"" + std::string(formula) + "\"): " + why);
}

struct Term {
  std::string letters_before, letters_after;  // around the "...", if any
  bool ellipsis = false;
};

Term parse_term(std::string_view formula, std::string_view text) {
  Term t;
  const size_t dots = text.find("...");
  if (dots != std::string_view::npos) {
    t.ellipsis = true;
    t.letters_before = text.substr(0, dots);
    t.letters_after = text.substr(dots + 3);
    if (t.letters_after.find('.') != std::string::npos) fail(formula, "\"...\" may appear once per operand");
  } else {
    t.letters_before = text;
  }
  for (char c : t.letters_before + t.letters_after)
    if (!std::isalpha(static_cast<unsigned char>(c)))
      fail(formula, std::string("'") + c + "' is not a letter (labels are a-z, A-Z)");
  return t;
}

// The labels of an operand with `ndim` dimensions, its ellipsis spanning the rest.
std::vector<int> labels_of(std::string_view formula, const Term& t, int ndim, int ellipsis_rank,
                           size_t operand) {
  const int letters = int(t.letters_before.size() + t.letters_after.size());
  if (t.ellipsis ? letters > ndim : letters != ndim)
    fail(formula, "operand " + std::to_string(operand) + " has " + std::to_string(ndim) +
                      " dimensions for " + std::to_string(letters) + " labels");
  std::vector<int> out(t.letters_before.begin(), t.letters_before.end());
  for (int k = ellipsis_rank - (ndim - letters); k < ellipsis_rank; ++k) out.push_back(kEllipsis + k);
  out.insert(out.end(), t.letters_after.begin(), t.letters_after.end());
  return out;
}

}  // namespace

Tensor Tensor::einsum(std::string_view formula, std::span<const Tensor> operands) {
  if (operands.empty()) fail(formula, "needs at least one tensor");
  std::string compact;
  for (char c : formula)
    if (c != ' ') compact += c;
  const size_t arrow = compact.find("->");
  const std::string lhs = compact.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t begin = 0;;) {
    const size_t comma = lhs.find(',', begin);
    terms.push_back(parse_term(formula, std::string_view(lhs).substr(begin, comma - begin)));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (terms.size() != operands.size())
    fail(formula, std::to_string(terms.size()) + " operand terms for " + std::to_string(operands.size()) +
                      " tensors");
  int ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].ellipsis)
      ellipsis_rank = std::max(ellipsis_rank, int(operands[i].ndim()) -
                                                  int(terms[i].letters_before.size() + terms[i].letters_after.size()));

  // Each operand on its own labels, repeated labels folded to their diagonal.
  std::vector<Tensor> xs;
  std::vector<std::vector<int>> labels;
  std::map<int, int64_t> size;  // a label's size; 1 broadcasts
  std::map<int, int> uses;
  for (size_t i = 0; i < operands.size(); ++i) {
    Tensor x = operands[i];
    std::vector<int> l = labels_of(formula, terms[i], x.ndim(), ellipsis_rank, i);
    for (int label : l) ++uses[label];  // as written: "ii" uses i twice, so "ii" is a trace
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < l.size() && !again; ++a)
        for (size_t b = a + 1; b < l.size() && !again; ++b) {
          if (l[a] != l[b]) continue;
          if (x.shape()[a] != x.shape()[b])
            fail(formula, "label '" + std::string(1, char(l[a])) + "' repeats in operand " + std::to_string(i) +
                              " over sizes " + std::to_string(x.shape()[a]) + " and " + std::to_string(x.shape()[b]));
          x = x.diagonal(0, int64_t(a), int64_t(b));  // the diagonal becomes the last axis
          const int label = l[a];
          l.erase(l.begin() + int64_t(b));
          l.erase(l.begin() + int64_t(a));
          l.push_back(label);
          again = true;
        }
    }
    for (size_t d = 0; d < l.size(); ++d) {
      const int64_t n = x.shape()[d];
      auto [it, fresh] = size.emplace(l[d], n);
      if (!fresh && it->second != n) {
        if (it->second != 1 && n != 1)
          fail(formula, "label " + (l[d] >= kEllipsis ? std::string("\"...\"") : "'" + std::string(1, char(l[d])) + "'") +
                            " has sizes " + std::to_string(it->second) + " and " + std::to_string(n));
        it->second = std::max(it->second, n);
      }
    }
    xs.push_back(x);
    labels.push_back(std::move(l));
  }

  // The output's labels: as written, or numpy's implicit ones (the ellipsis, then the letters
  // used once, in alphabetical order).
  std::vector<int> out;
  if (arrow != std::string::npos) {
    const Term t = parse_term(formula, std::string_view(compact).substr(arrow + 2));
    if (t.ellipsis && ellipsis_rank == 0 && !std::any_of(terms.begin(), terms.end(), [](const Term& x) { return x.ellipsis; }))
      fail(formula, "the output has \"...\" but no operand does");
    out = labels_of(formula, t, int(t.letters_before.size() + t.letters_after.size()) + (t.ellipsis ? ellipsis_rank : 0),
                    ellipsis_rank, operands.size());
    for (size_t a = 0; a < out.size(); ++a) {
      if (!size.count(out[a]))
        fail(formula, "output label '" + std::string(1, char(out[a])) + "' is in no operand");
      if (std::count(out.begin(), out.end(), out[a]) > 1)
        fail(formula, "output label '" + std::string(1, char(out[a])) + "' appears twice");
    }
  } else {
    for (int k = 0; k < ellipsis_rank; ++k) out.push_back(kEllipsis + k);
    for (const auto& [label, n] : uses)
      if (label < kEllipsis && n == 1) out.push_back(label);
  }
  std::vector<int> order = out;
  for (const auto& [label, n] : size)
    if (std::find(out.begin(), out.end(), label) == out.end()) order.push_back(label);

  // Every operand permuted to `order`, with size-1 dimensions for the labels it lacks.
  std::optional<Tensor> product;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<int64_t> perm;
    Shape lined;
    for (int label : order) {
      const auto at = std::find(labels[i].begin(), labels[i].end(), label);
      if (at == labels[i].end()) {
        lined.push_back(1);
      } else {
        perm.push_back(at - labels[i].begin());
        lined.push_back(xs[i].shape()[size_t(at - labels[i].begin())]);
      }
    }
    const Tensor lined_up = xs[i].permute(perm).reshape(lined);
    product = product ? *product * lined_up : lined_up;
  }
  Shape full;
  for (int label : order) full.push_back(size[label]);
  const Tensor all = product->expand(full);  // a label only broadcast still counts its size
  Axes summed;
  for (size_t a = out.size(); a < order.size(); ++a) summed.list.push_back(int64_t(a));
  return summed.list.empty() ? all : all.sum(summed);
}

}  // namespace vkg
