// Signal operators. Window functions (HannWindow, HammingWindow, BlackmanWindow) are cosine sums
// computed on the host in double, as their size is a host value; `periodic` windows have period
// size, symmetric ones size - 1. DFT and STFT multiply by host-built cosine and sine matrices (an
// O(n^2) transform per axis, which the matmul path runs fast for the sizes models use).
#include <cmath>
#include <numbers>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

OpFn window(double a0, double a1, double a2) {
  return [=](OpContext& c) -> std::vector<Value> {
    const int64_t n = c.int_in(0);
    const bool periodic = c.attr_i("periodic", 1) != 0;
    const DType d = dtype_from_onnx(int32_t(c.attr_i("output_datatype", 1)), c.where());
    const double period = double(periodic ? n : n - 1);
    std::vector<double> w(size_t(std::max<int64_t>(n, 0)));
    for (int64_t i = 0; i < n; ++i) {
      const double t = 2 * std::numbers::pi * double(i) / period;
      w[size_t(i)] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
    }
    return {Tensor(w, Shape{n}, c.device()).cast(d)};
  };
}

// The real and imaginary parts' transform along the last axis of length n, to `bins` outputs.
std::pair<Tensor, Tensor> dft_last(const Tensor& re, const std::optional<Tensor>& im, int64_t n,
                                   int64_t bins, bool inverse) {
  std::vector<float> cs(size_t(n * bins)), sn(size_t(n * bins));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < bins; ++k) {
      // k t mod n keeps the angle small, so float64 to float32 loses nothing for long signals.
      const double theta = 2 * std::numbers::pi * double((k * t) % n) / double(n);
      cs[size_t(t * bins + k)] = float(std::cos(theta));
      sn[size_t(t * bins + k)] = float(std::sin(theta));
    }
  const Tensor c = Tensor(cs, Shape{n, bins}, re.device()).cast(re.dtype());
  const Tensor s = Tensor(sn, Shape{n, bins}, re.device()).cast(re.dtype());
  // forward: (a + ib)(cos - i sin); inverse: (a + ib)(cos + i sin) / n
  const double sign = inverse ? -1.0 : 1.0;
  Tensor out_re = re.matmul(c), out_im = -(re.matmul(s)) * sign;
  if (im) {
    out_re = out_re + im->matmul(s) * sign;
    out_im = out_im + im->matmul(c);
  }
  if (inverse) out_re = out_re / double(n), out_im = out_im / double(n);
  return {out_re, out_im};
}

// Fits the last axis of t to length n: truncated, or padded with zeros.
Tensor fit_length(const Tensor& t, int64_t n) {
  const int64_t have = t.shape().back();
  std::vector<std::pair<int64_t, int64_t>> pad(size_t(t.ndim()), {0, 0});
  pad.back() = {0, n - have};
  return t.pad(pad);
}

std::vector<Value> dft(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = x.ndim();
  const int64_t axis = axis_of(c, c.attr_i("axis", 1), r - 1);
  const bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
  if (inverse && onesided) c.unsupported("inverse with onesided");
  const int64_t parts = x.shape().back();
  if (parts != 1 && parts != 2) c.fail("the last axis must hold 1 (real) or 2 (complex) values");
  Tensor re = x[{ellipsis, 0}].transpose(axis, -1);
  std::optional<Tensor> im;
  if (parts == 2) im = x[{ellipsis, 1}].transpose(axis, -1);
  const int64_t n = c.has(1) ? c.int_in(1) : re.shape().back();
  re = fit_length(re, n);
  if (im) im = fit_length(*im, n);
  const int64_t bins = onesided ? n / 2 + 1 : n;
  auto [yr, yi] = dft_last(re, im, n, bins, inverse);
  return {Tensor::stack(std::vector<Tensor>{yr.transpose(axis, -1), yi.transpose(axis, -1)}, -1)};
}

// STFT: frames of frame_length every frame_step along the signal, windowed, each transformed.
std::vector<Value> stft(OpContext& c) {
  const Tensor x = c.in(0);  // (batch, length, 1 or 2)
  const int64_t step = c.int_in(1);
  const std::optional<Tensor> window = c.opt(2);
  int64_t len = c.has(3) ? c.int_in(3) : (window ? window->shape()[0] : 0);
  if (len <= 0) c.fail("needs a window or a frame_length");
  const bool onesided = c.attr_i("onesided", 1) != 0;
  const int64_t parts = x.shape().back();
  auto frames = [&](const Tensor& t) {  // (batch, frames, len), windowed
    Tensor f = t.unfold(1, len, step);
    return window ? f * window->cast(f.dtype()) : f;
  };
  const Tensor re = frames(x[{ellipsis, 0}]);
  std::optional<Tensor> im;
  if (parts == 2) im = frames(x[{ellipsis, 1}]);
  const int64_t bins = onesided ? len / 2 + 1 : len;
  auto [yr, yi] = dft_last(re, im, len, bins, false);
  return {Tensor::stack(std::vector<Tensor>{yr, yi}, -1)};
}

// MelWeightMatrix: triangular filters between mel-spaced frequencies, as ONNX's reference.
std::vector<Value> mel_weight_matrix(OpContext& c) {
  const int64_t mels = c.int_in(0), dft_len = c.int_in(1), rate = c.int_in(2);
  const double lo = c.double_in(3), hi = c.double_in(4);
  const DType d = dtype_from_onnx(int32_t(c.attr_i("output_datatype", 1)), c.where());
  const int64_t bins = dft_len / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  auto to_hz = [](double mel) { return 700 * (std::pow(10, mel / 2595) - 1); };
  const double lo_mel = to_mel(lo), step = (to_mel(hi) - lo_mel) / double(mels + 2);
  std::vector<int64_t> bin(size_t(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i)
    bin[size_t(i)] =
        int64_t(std::floor(to_hz(lo_mel + double(i) * step) * double(dft_len + 1) / double(rate)));
  std::vector<double> w(size_t(bins * mels), 0.0);
  for (int64_t m = 0; m < mels; ++m) {
    const int64_t l = bin[size_t(m)], ctr = bin[size_t(m + 1)], h = bin[size_t(m + 2)];
    const double up = double(ctr - l), down = double(h - ctr);
    if (ctr == l) w[size_t(ctr * mels + m)] = 1;  // a filter of zero width keeps its center
    if (ctr != l)
      for (int64_t k = l; k <= ctr; ++k) w[size_t(k * mels + m)] = double(k - l) / up;
    for (int64_t k = ctr; k < h; ++k) w[size_t(k * mels + m)] = double(h - k) / down;
  }
  return {Tensor(w, Shape{bins, mels}, c.device()).cast(d)};
}

}  // namespace

void add_signal_ops(OpTable& t) {
  t["DFT"] = dft;
  t["STFT"] = stft;
  t["MelWeightMatrix"] = mel_weight_matrix;
  t["HannWindow"] = window(0.5, 0.5, 0);
  t["HammingWindow"] = window(25.0 / 46.0, 21.0 / 46.0, 0);
  t["BlackmanWindow"] = window(0.42, 0.5, 0.08);
}

}  // namespace vkg::onnx
