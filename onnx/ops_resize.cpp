// Resize, Upsample and RoiAlign. Resize and Upsample are separable interpolation: each resized axis
// gets a host-built weight matrix (output positions x input positions) that the axis is multiplied
// by, so nearest, linear and cubic, every coordinate_transformation_mode, exclude_outside and
// tf_crop_and_resize's extrapolation are one rule each. The weights follow ONNX's reference
// (onnx/reference resize): the n nearest input positions of each output position's source
// coordinate, clamped to the edge. RoiAlign is one host-built matrix per region (bilinear samples
// averaged over each bin) applied to the image of the region's batch entry.
#include <algorithm>
#include <cmath>
#include <limits>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

struct Interp {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

std::vector<double> coeffs_of(const Interp& p, double ratio, bool integer) {
  if (p.mode == "nearest") {
    if (integer) return {0, 1};
    if (p.nearest == "round_prefer_floor")
      return {double(ratio > 0.5 ? 0 : 1), double(ratio > 0.5)};
    if (p.nearest == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (p.nearest == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (p.mode == "linear") return {1 - ratio, ratio};
  const double a = p.cubic_a, r = ratio, s = 1 - ratio;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

// Weights (out x in) for one axis and whether each output position is inside (else extrapolated).
std::pair<std::vector<float>, std::vector<bool>> axis_weights(const Interp& p, int64_t in,
                                                              int64_t out, double scale,
                                                              double roi_start, double roi_end) {
  std::vector<float> w(size_t(out * in), 0.0f);
  std::vector<bool> valid(size_t(out), true);
  const double out_width = scale * double(in);
  for (int64_t o = 0; o < out; ++o) {
    const double x = double(o);
    double xo;
    if (p.coord == "align_corners")
      xo = out_width == 1 ? 0 : x * double(in - 1) / (out_width - 1);
    else if (p.coord == "asymmetric")
      xo = x / scale;
    else if (p.coord == "tf_half_pixel_for_nearest" || p.coord == "tf_half_pixel_for_nn")
      xo = (x + 0.5) / scale;
    else if (p.coord == "pytorch_half_pixel")
      xo = out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    else if (p.coord == "tf_crop_and_resize") {
      xo = out_width == 1 ? (roi_end - roi_start) * double(in - 1) / 2
                          : x * (roi_end - roi_start) * double(in - 1) / (out_width - 1);
      xo += roi_start * double(in - 1);
      if (xo < 0 || xo > double(in - 1)) {
        valid[size_t(o)] = false;
        continue;
      }
    } else
      xo = (x + 0.5) / scale - 0.5;  // half_pixel
    const double fl = std::floor(xo);
    const bool integer = xo == fl;
    std::vector<double> c = coeffs_of(p, integer ? 1.0 : xo - fl, integer);
    const int64_t n = int64_t(c.size()), pad = (n + 1) / 2;
    // The n positions nearest xo (ties to the lower), in the edge-padded axis.
    std::vector<int64_t> idx;
    const double xp = xo + double(pad);
    std::vector<int64_t> cand;
    for (int64_t k = int64_t(std::floor(xp)) - n; k <= int64_t(std::floor(xp)) + n; ++k)
      if (k >= 0 && k < in + 2 * pad) cand.push_back(k);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
      const double da = std::abs(xp - double(a)), db = std::abs(xp - double(b));
      return da != db ? da < db : a < b;
    });
    cand.resize(size_t(n));
    std::sort(cand.begin(), cand.end());
    for (auto& k : cand) k -= pad;
    if (p.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (cand[size_t(k)] < 0 || cand[size_t(k)] >= in) c[size_t(k)] = 0;
        sum += c[size_t(k)];
      }
      for (auto& v : c) v /= sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t src = std::clamp<int64_t>(cand[size_t(k)], 0, in - 1);
      w[size_t(o * in + src)] += float(c[size_t(k)]);
    }
  }
  return {w, valid};
}

// Output sizes floor(in * scale): a scale must be a positive finite number (NaN would make the
// cast to int64 undefined, a negative one a negative size).
Shape sizes_of(OpContext& c, const Tensor& x, const std::vector<double>& scales) {
  Shape sizes;
  for (size_t a = 0; a < scales.size(); ++a) {
    if (!(scales[a] > 0) || !std::isfinite(scales[a]) ||
        double(x.shape()[a]) * scales[a] > double(std::numeric_limits<int32_t>::max()))
      c.fail("scale " + std::to_string(scales[a]) + " of axis " + std::to_string(a) +
             " is not a positive size factor");
    sizes.push_back(int64_t(std::floor(double(x.shape()[a]) * scales[a])));
  }
  return sizes;
}

Tensor interpolate(OpContext& c, Tensor x, const Interp& p, const std::vector<double>& scales,
                   const Shape& sizes, const std::vector<double>& roi) {
  const DType d = x.dtype();
  if (p.coord == "tf_crop_and_resize" && int64_t(roi.size()) != 2 * x.ndim())
    c.fail("roi holds " + std::to_string(roi.size()) + " values, not 2 per axis");
  Tensor y = d.is_float() ? x : x.cast(dtypes::float32);
  const int64_t r = x.ndim();
  for (int64_t a = 0; a < r; ++a) {
    const int64_t in = x.shape()[size_t(a)], out = sizes[size_t(a)];
    const bool crop = p.coord == "tf_crop_and_resize";
    const double rs = crop ? roi.at(size_t(a)) : 0, re = crop ? roi.at(size_t(a + r)) : 1;
    if (in == out && scales[size_t(a)] == 1.0 && !crop) continue;
    if (out == 0 || in == 0) c.fail("resizes an axis to or from size 0");
    auto [w, valid] = axis_weights(p, in, out, scales[size_t(a)], rs, re);
    const Tensor wt = Tensor(w, Shape{out, in}, x.device()).transpose().cast(y.dtype());
    y = y.transpose(a, -1).matmul(wt).transpose(a, -1);
    if (std::find(valid.begin(), valid.end(), false) != valid.end()) {
      Shape along(size_t(r), 1);
      along[size_t(a)] = out;
      const Tensor mask = Tensor(valid, along, x.device());
      y = mask.where(y, y.scalar_like(p.extrapolation));
    }
  }
  return d.is_float() ? y : y.cast(d);
}

std::vector<Value> resize(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = x.ndim();
  Interp p;
  p.mode = c.attr_s("mode", "nearest");
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    c.unsupported("mode '" + p.mode + "'");
  if (c.opset() >= 11) {
    p.coord = c.attr_s("coordinate_transformation_mode", "half_pixel");
    p.nearest = c.attr_s("nearest_mode", "round_prefer_floor");
    p.cubic_a = c.attr_f("cubic_coeff_a", -0.75f);
    p.exclude_outside = c.attr_i("exclude_outside", 0) != 0;
    p.extrapolation = c.attr_f("extrapolation_value", 0.0f);
  } else {
    p.coord = "asymmetric";
    p.nearest = "floor";
  }
  for (const std::string& m : {p.coord})
    if (m != "half_pixel" && m != "asymmetric" && m != "align_corners" &&
        m != "pytorch_half_pixel" && m != "tf_half_pixel_for_nearest" &&
        m != "tf_half_pixel_for_nn" && m != "tf_crop_and_resize")
      c.unsupported("coordinate_transformation_mode '" + m + "'");
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
  const size_t scales_at = c.opset() >= 11 ? 2 : 1;
  if (c.opset() >= 11 && c.has(1) && c.in(1).numel() > 0) roi = c.doubles_in(1);
  if (c.has(scales_at) && c.in(scales_at).numel() > 0) scales = c.doubles_in(scales_at);
  if (c.opset() >= 11 && c.has(3) && c.in(3).numel() > 0) sizes = c.ints_in(3);
  if (!sizes.empty()) {
    if (int64_t(sizes.size()) != r)
      c.fail("sizes holds " + std::to_string(sizes.size()) + " values for rank " +
             std::to_string(r));
    for (int64_t a = 0; a < r; ++a) {
      if (sizes[size_t(a)] < 0) c.fail("sizes holds " + std::to_string(sizes[size_t(a)]));
      scales.push_back(double(sizes[size_t(a)]) / double(x.shape()[size_t(a)]));
    }
  } else {
    if (int64_t(scales.size()) != r)
      c.fail("needs scales or sizes for each of the " + std::to_string(r) + " axes");
    sizes = sizes_of(c, x, scales);
  }
  return {interpolate(c, x, p, scales, sizes, roi)};
}

// Upsample (opsets 7 and 9): scales as an attribute, then as an input; asymmetric coordinates,
// nearest rounds down.
std::vector<Value> upsample(OpContext& c) {
  const Tensor x = c.in(0);
  Interp p;
  p.mode = c.attr_s("mode", "nearest");
  if (p.mode == "bilinear") p.mode = "linear";
  if (p.mode != "nearest" && p.mode != "linear") c.unsupported("mode '" + p.mode + "'");
  p.coord = "asymmetric";
  p.nearest = "floor";
  std::vector<double> scales;
  if (auto s = c.attr_floats("scales"))
    scales.assign(s->begin(), s->end());
  else
    scales = c.doubles_in(1);
  if (int64_t(scales.size()) != x.ndim()) c.fail("scales holds a value per axis");
  return {interpolate(c, x, p, scales, sizes_of(c, x, scales), {})};
}

// RoiAlign (average mode): bin (ph, pw) of region r averages grid_h x grid_w bilinear samples.
std::vector<Value> roi_align(OpContext& c) {
  const Tensor x = c.in(0);
  if (x.ndim() != 4) c.fail("needs an (N, C, H, W) input");
  const std::string mode = c.attr_s("mode", "avg");
  if (mode != "avg") c.unsupported("mode '" + mode + "'");
  const int64_t oh = c.attr_i("output_height", 1), ow = c.attr_i("output_width", 1);
  const int64_t ratio = c.attr_i("sampling_ratio", 0);
  const double scale = c.attr_f("spatial_scale", 1.0f);
  const std::string coord = c.attr_s("coordinate_transformation_mode",
                                     c.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  const bool half = coord == "half_pixel";
  if (!half && coord != "output_half_pixel")
    c.unsupported("coordinate_transformation_mode '" + coord + "'");
  const int64_t ch = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const std::vector<double> rois = host_doubles(c.in(1));
  const int64_t nr = c.in(1).shape()[0];
  std::vector<float> wt(size_t(nr * oh * ow * h * w), 0.0f);
  const double off = half ? 0.5 : 0.0;
  for (int64_t r = 0; r < nr; ++r) {
    const double* roi = &rois[size_t(r * 4)];
    const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
    double rw = roi[2] * scale - off - sw, rh = roi[3] * scale - off - sh;
    if (!half) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / double(oh), bw = rw / double(ow);
    const int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(oh)));
    const int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(ow)));
    const double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw) {
        float* row = &wt[size_t(((r * oh + ph) * ow + pw) * h * w)];
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double y = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
            if (y < -1 || y > double(h) || xx < -1 || xx > double(w)) continue;
            y = std::max(y, 0.0), xx = std::max(xx, 0.0);
            int64_t y0 = int64_t(y), x0 = int64_t(xx), y1, x1;
            if (y0 >= h - 1)
              y0 = y1 = h - 1, y = double(y0);
            else
              y1 = y0 + 1;
            if (x0 >= w - 1)
              x0 = x1 = w - 1, xx = double(x0);
            else
              x1 = x0 + 1;
            const double ly = y - double(y0), lx = xx - double(x0), hy = 1 - ly, hx = 1 - lx;
            row[y0 * w + x0] += float(hy * hx / count);
            row[y0 * w + x1] += float(hy * lx / count);
            row[y1 * w + x0] += float(ly * hx / count);
            row[y1 * w + x1] += float(ly * lx / count);
          }
      }
  }
  const Tensor weights = Tensor(wt, Shape{nr, oh * ow, h * w}, x.device()).cast(x.dtype());
  const Tensor images = x.index_select(0, c.in(2)).reshape(Shape{nr, ch, h * w});
  return {images.matmul(weights.transpose()).reshape(Shape{nr, ch, oh, ow})};
}

}  // namespace

void add_resize_ops(OpTable& t) {
  t["RoiAlign"] = roi_align;
  t["Resize"] = resize;
  t["Upsample"] = upsample;
}

}  // namespace vkg::onnx
