// Sampling built on sort and the scans: randperm (the order of uniform keys) and multinomial
// (inverse-CDF with replacement; Gumbel top-k without). Both draw from the global generator, so a
// seed reproduces them on every device.
#include <cmath>
#include <limits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

// The positions that sort n uniform keys: each permutation equally likely up to ties among the
// keys, which the stable sort breaks by position (about n^2 / 2^25 tied pairs of float32 keys).
Tensor Tensor::randperm(int64_t n, DType dtype, std::string device) {
  if (n < 0) throw Error("randperm: n must not be negative, got " + std::to_string(n));
  if (!dtype.is_int()) throw Error("randperm: needs an integer dtype, got " + dtype.name());
  if (n == 0) return Tensor::zeros({0}, dtype, std::move(device));
  return Tensor::rand({n}, dtypes::float32, std::move(device)).argsort().cast(dtype);
}

// Rows of non-negative weights (C) or (N, C), not necessarily normalized; answers int32 class
// indices (num_samples) or (N, num_samples).
Tensor Tensor::multinomial(int64_t num_samples, bool replacement) const {
  const std::string what = shape_str(shape()) + " " + dtype().name();
  if (ndim() < 1 || ndim() > 2 || !dtype().is_float())
    throw Error("multinomial: needs float weights of shape (C) or (N, C), got " + what);
  const int64_t classes = shape().back();
  if (num_samples < 0 || (!replacement && num_samples > classes))
    throw Error("multinomial: cannot draw " + std::to_string(num_samples) + " samples from " +
                std::to_string(classes) + " classes " + (replacement ? "" : "without replacement ") + "(weights " +
                what + ")");
  if (ndim() == 1) return reshape({1, classes}).multinomial(num_samples, replacement).reshape({num_samples});
  const int64_t rows = shape()[0];
  if (!replacement) {
    // Gumbel top-k: the k largest of log w + Gumbel noise are a draw of k without replacement.
    const Tensor u = Tensor::rand(shape(), dtypes::float32, device()).cast(dtype());
    const Tensor gumbel = -(-(u.maximum(std::numeric_limits<float>::min())).log()).log();
    return (log() + gumbel).topk(num_samples, -1).second;
  }
  // Inverse CDF: the number of classes whose cumulative weight is at most u * total.
  const Tensor cdf = cumsum(-1);
  const Tensor total = cdf.shrink({{0, rows}, {classes - 1, classes}});  // (N, 1)
  const Tensor u = Tensor::rand({rows, num_samples, 1}, dtype(), device()) * total.reshape({rows, 1, 1});
  const Tensor below = cdf.reshape({rows, 1, classes}).le(u);
  return below.cast(dtypes::int32).sum(-1).minimum(int32_t(classes - 1));
}

}  // namespace vkg
