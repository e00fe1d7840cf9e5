#include <vkgrad/core/index_check.hpp>

#include <cstring>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

// The one element of t as an integer, read on the host (no int64 arithmetic on the device).
int64_t element_as_int(const Tensor& t) {
  const std::vector<std::byte> raw = t.bytes();
  return visit_dtype(t.dtype(), [&](auto tag) -> int64_t {
    using T = decltype(tag);
    T v{};
    std::memcpy(&v, raw.data(), sizeof(T));
    if constexpr (std::is_integral_v<T>)
      return int64_t(v);
    else
      return 0;
  });
}

}  // namespace

void check_index_values(const Tensor& index, int64_t n, std::string_view op, std::string_view what,
                        std::optional<int64_t> except) {
  if (!setting("CHECK_INDICES") || index.numel() == 0) return;
  NoGrad no_graph;
  const Tensor flat = index.reshape({index.numel()});
  const DType d = flat.dtype();
  Tensor bad = d.is_unsigned() ? Tensor::full(flat.shape(), false, dtypes::bool_, flat.device())
                               : flat.lt(0);
  // n as a constant of the index's dtype only where it fits: otherwise no index reaches it.
  if (double(n) <= dtypes::max_value(d)) bad = bad.logical_or(flat.ge(n));
  if (except && double(*except) >= dtypes::min_value(d) && double(*except) <= dtypes::max_value(d))
    bad = bad.logical_and(flat.ne(*except));
  if (!bad.any().item<bool>()) return;
  const int64_t at = bad.argmax().item<int>();
  throw Error(std::string(op) + ": index " + std::to_string(element_as_int(flat[at])) +
              " (element " + std::to_string(at) + " of indices of shape " +
              shape_str(index.shape()) + ") is out of range for " + std::string(what) +
              " (CHECK_INDICES=1)");
}

}  // namespace vkg
