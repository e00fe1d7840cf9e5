// GridSample (opset 16) on (N, C, H, W) inputs, with torch's grid_sampler semantics that ONNX's
// test data follows: the grid's (x, y) in [-1, 1] map to pixel coordinates (align_corners or
// not); bilinear and nearest apply the padding mode to the coordinate, bicubic to each of its
// 4 x 4 taps. Every tap is one indexed load over the flattened image.
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

struct Geometry {
  int64_t n, ch, h, w, points;
  bool align;
  std::string padding;
};

Tensor unnormalize(const Tensor& g, int64_t size, bool align) {
  return align ? (g + 1.0f) * (float(size - 1) / 2) : ((g + 1.0f) * float(size) - 1.0f) / 2;
}

// torch's reflect_coordinates, then a clip into the image.
Tensor reflect(const Tensor& x, int64_t size, bool align) {
  const float lo2 = align ? 0.0f : -1.0f, hi2 = align ? float(2 * (size - 1)) : float(2 * size - 1);
  if (lo2 == hi2) return x * 0.0f;
  const float mn = lo2 / 2, span = (hi2 - lo2) / 2;
  const Tensor in = (x - mn).abs();
  const Tensor flips = (in / span).floor();
  const Tensor extra = in - flips * span;
  const Tensor even = (flips - (flips / 2.0f).floor() * 2.0f).eq(0.0f);
  return even.where(extra + mn, span - extra + mn).clip(0.0f, float(size - 1));
}

Tensor pad_coordinate(const Tensor& x, int64_t size, const Geometry& g) {
  if (g.padding == "border") return x.clip(0.0f, float(size - 1));
  if (g.padding == "reflection") return reflect(x, size, g.align);
  return x;
}

// The image values at integer coordinates (ix, iy) (float tensors of (N, points)); zero outside.
Tensor tap(const Tensor& flat, const Tensor& ix, const Tensor& iy, const Geometry& g) {
  const Tensor inside = ix.ge(0.0f)
                            .logical_and(ix.le(float(g.w - 1)))
                            .logical_and(iy.ge(0.0f))
                            .logical_and(iy.le(float(g.h - 1)));
  const Tensor idx = (iy.clip(0.0f, float(g.h - 1)) * float(g.w) + ix.clip(0.0f, float(g.w - 1)))
                         .cast(dtypes::int32);
  const Tensor v =
      flat.gather(2, idx.reshape(Shape{g.n, 1, g.points}).expand(Shape{g.n, g.ch, g.points}));
  return inside.reshape(Shape{g.n, 1, g.points}).where(v, v.scalar_like(0.0));
}

Tensor cubic(const Tensor& t, int k) {  // torch's cubic convolution weights, A = -0.75
  const float a = -0.75f;
  auto near = [&](const Tensor& x) { return ((x * (a + 2) - (a + 3)) * x * x) + 1.0f; };
  auto far = [&](const Tensor& x) { return ((x * a - 5 * a) * x + 8 * a) * x - 4 * a; };
  switch (k) {
    case 0:
      return far(t + 1.0f);
    case 1:
      return near(t);
    case 2:
      return near(1.0f - t);
    default:
      return far(2.0f - t);
  }
}

std::vector<Value> grid_sample(OpContext& c) {
  const Tensor x = c.in(0), grid = c.in(1);
  if (x.ndim() != 4) c.unsupported(std::to_string(x.ndim() - 2) + "-d sampling");
  const std::string mode = c.attr_s("mode", "bilinear");
  Geometry g{x.shape()[0],
             x.shape()[1],
             x.shape()[2],
             x.shape()[3],
             grid.shape()[1] * grid.shape()[2],
             c.attr_i("align_corners", 0) != 0,
             c.attr_s("padding_mode", "zeros")};
  if (g.padding != "zeros" && g.padding != "border" && g.padding != "reflection")
    c.unsupported("padding_mode '" + g.padding + "'");
  const Tensor flat = x.cast(dtypes::float32).reshape(Shape{g.n, g.ch, g.h * g.w});
  const Tensor gf = grid.cast(dtypes::float32).reshape(Shape{g.n, g.points, 2});
  Tensor ix = unnormalize(gf[{Slice{}, Slice{}, 0}], g.w, g.align);
  Tensor iy = unnormalize(gf[{Slice{}, Slice{}, 1}], g.h, g.align);
  Tensor y = [&] {
    if (mode == "nearest") {
      ix = pad_coordinate(ix, g.w, g), iy = pad_coordinate(iy, g.h, g);
      return tap(flat, ix.round(), iy.round(), g);
    }
    if (mode == "bilinear") {
      ix = pad_coordinate(ix, g.w, g), iy = pad_coordinate(iy, g.h, g);
      const Tensor x0 = ix.floor(), y0 = iy.floor();
      const Tensor wx = (ix - x0).reshape(Shape{g.n, 1, g.points}),
                   wy = (iy - y0).reshape(Shape{g.n, 1, g.points});
      return tap(flat, x0, y0, g) * (1.0f - wx) * (1.0f - wy) +
             tap(flat, x0 + 1.0f, y0, g) * wx * (1.0f - wy) +
             tap(flat, x0, y0 + 1.0f, g) * (1.0f - wx) * wy +
             tap(flat, x0 + 1.0f, y0 + 1.0f, g) * wx * wy;
    }
    if (mode != "bicubic") c.unsupported("mode '" + mode + "'");
    const Tensor x0 = ix.floor(), y0 = iy.floor();
    const Tensor tx = ix - x0, ty = iy - y0;
    std::optional<Tensor> sum;
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        const Tensor px = pad_coordinate(x0 + float(i - 1), g.w, g),
                     py = pad_coordinate(y0 + float(j - 1), g.h, g);
        const Tensor w = (cubic(tx, i) * cubic(ty, j)).reshape(Shape{g.n, 1, g.points});
        const Tensor term = tap(flat, px, py, g) * w;
        sum = sum ? *sum + term : term;
      }
    return *sum;
  }();
  return {y.reshape(Shape{g.n, g.ch, grid.shape()[1], grid.shape()[2]}).cast(x.dtype())};
}

}  // namespace

void add_grid_sample_ops(OpTable& t) { t["GridSample"] = grid_sample; }

}  // namespace vkg::onnx
