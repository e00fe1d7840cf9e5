// View: one strided window onto a flat buffer. Element x of a view with shape S lives at
// offset + sum(x[i] * strides[i]) and exists only where every x[i] lies in mask[i] (elsewhere it
// reads as padding). Every movement op except some reshapes is a new View over the same buffer;
// ShapeTracker (core/shape_tracker.hpp) stacks Views for the reshapes one View cannot express.
//
//   View v = View::create({10, 10});           // strides (10, 1), contiguous
//   v = v.permute({1, 0}).pad({{1, 1}, {0, 0}});
//   std::cout << v;   // View(shape=(12, 10), strides=(1, 10), offset=-1, mask=((1, 11), (0, 10)),
//   contiguous=False)
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/core/shape.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

// [begin, end) along one dimension: a mask entry or a shrink argument.
using DimRange = std::pair<int64_t, int64_t>;
using Mask = std::vector<DimRange>;
// (before, after): how many padding elements a pad adds on each side of one dimension.
using PadWidth = std::pair<int64_t, int64_t>;

// Where an element lives and whether it exists: `index` is an integer expression in the index
// variables, `valid` a bool expression that is false where padding or a mask hides the element
// (there `index` is meaningless).
struct IndexExpr {
  UOpPtr index;
  UOpPtr valid;
};

// A view whose sizes hold variables, as integer expressions over DEFINE_VARs (CONSTs where a
// field is a plain number). Kernels are compiled from these, once for every binding.
using SymRange = std::pair<UOpPtr, UOpPtr>;
struct SymbolicView {
  std::vector<UOpPtr> shape, strides;
  UOpPtr offset;
  std::vector<SymRange> mask;  // empty: every element exists
  bool operator==(const SymbolicView&) const = default;
};

struct View {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::optional<Mask> mask;  // nullopt: every element exists
  bool contiguous = true;    // row-major over [0, size): offset 0, no mask, canonical strides
  // Set for a symbolic view (core/view_symbolic.cpp). Its fields are then the truth; the numbers
  // above hold each dimension's largest size (so sizes read from them are upper bounds, as a
  // launch grid needs), zero strides and offset, and no mask. Every op keeps a view symbolic;
  // those that cannot express a symbolic result (flip, stride) throw vkg::Error.
  std::optional<SymbolicView> sym;

  // The canonical view: strides default to row-major; a dimension of size 1, or one that a mask
  // narrows to a single index, gets stride 0 (its one index moves into the offset); a mask that
  // hides nothing becomes nullopt and one that hides everything becomes all (0, 0) with zero
  // strides and offset; a shape with a 0 is contiguous with zero strides. Equal views compare
  // equal only in this form, so every op returns canonical views.
  static View create(Shape shape, std::optional<std::vector<int64_t>> strides = std::nullopt,
                     int64_t offset = 0, std::optional<Mask> mask = std::nullopt);

  int64_t size() const;  // number of elements (1 for shape ())
  // True when the mask hides every element.
  bool all_masked() const;

  // Movement ops. Each checks its argument against this shape and throws vkg::Error naming the
  // op, the shape and the argument. reshape gives nullopt when one view cannot express the
  // result (the ShapeTracker then stacks a new view).
  std::optional<View> reshape(const Shape& new_shape) const;
  View permute(const std::vector<int64_t>& order) const;
  View expand(const Shape& new_shape) const;  // only dimensions of size 1 change size
  View pad(const std::vector<PadWidth>& widths) const;
  View shrink(const Mask& ranges) const;  // keeps [begin, end) of each dimension
  View flip(const std::vector<bool>& flipped) const;
  View flip_axes(const std::vector<int64_t>& axes) const;
  // Every |s|-th element of each dimension, from the end when s < 0 (tinygrad's STRIDE).
  View stride(const std::vector<int64_t>& steps) const;

  // ---- symbolic sizes (core/view_symbolic.cpp) ----

  // The canonical symbolic view (row-major strides by default; a dimension that is the plain
  // number 1 gets stride 0). A view whose fields are all plain numbers comes back concrete.
  static View create_symbolic(std::vector<UOpPtr> shape,
                              std::optional<std::vector<UOpPtr>> strides = std::nullopt,
                              UOpPtr offset = nullptr, std::vector<SymRange> mask = {});
  // This view's fields as expressions (CONSTs for a concrete view).
  SymbolicView symbolic() const;
  std::vector<UOpPtr> shape_exprs() const { return symbolic().shape; }
  // Movement ops with symbolic arguments. Arguments are not checked against the sizes: Tensor
  // checked them with the bound values. reshape expresses a contiguous view in any shape and
  // otherwise only inserts or removes dimensions of size 1 (nullopt where it cannot).
  std::optional<View> reshape_sym(const std::vector<UOpPtr>& new_shape) const;
  View expand_sym(const std::vector<UOpPtr>& new_shape) const;
  View pad_sym(const std::vector<SymRange>& widths) const;
  View shrink_sym(const std::vector<SymRange>& ranges) const;

  // The same mapping over the fewest dimensions: adjacent dimensions whose strides chain merge.
  View minify() const;

  // Index and validity of the element at per-dimension indexes `idxs` (integer UOps), ANDed with
  // `valid`. Unsimplified: the caller simplifies once the whole expression is built. Conditions
  // that the bounds of an index already decide are left out.
  IndexExpr expr(const std::vector<UOpPtr>& idxs, const UOpPtr& valid) const;

  bool operator==(const View&) const = default;
  size_t hash() const;
};

namespace symbolic_view {  // the symbolic forms core/view.cpp calls (core/view_symbolic.cpp)
View permute(const View& v, const std::vector<int64_t>& order);
IndexExpr expr(const View& v, const std::vector<UOpPtr>& idxs, const UOpPtr& valid);
[[noreturn]] void unsupported(const char* op);
std::vector<UOpPtr> as_exprs(const Shape& s);
}  // namespace symbolic_view

// Row-major strides of `shape`, with 0 for dimensions of size 1.
std::vector<int64_t> strides_for_shape(const Shape& shape);

// A run of adjacent dimensions that behaves as one: `size` elements, `stride` apart, of which
// the first `real_size` are distinct addresses (the rest sit behind a mask narrowed to one
// index, or are broadcast). Dimensions merge when the outer stride equals the inner size times
// the inner stride, when the outer one is size 1 or masked to one index, or both strides are 0.
struct MergedDim {
  int64_t size, stride, real_size;
  bool operator==(const MergedDim&) const = default;
};
std::vector<MergedDim> merge_dims(const Shape& shape, const std::vector<int64_t>& strides,
                                  const std::optional<Mask>& mask = std::nullopt);

// View(shape=(10, 10), strides=(10, 1), offset=0, mask=None, contiguous=True)
std::string to_string(const View& v);
std::ostream& operator<<(std::ostream& os, const View& v);

}  // namespace vkg

template <>
struct std::hash<vkg::View> {
  size_t operator()(const vkg::View& v) const { return v.hash(); }
};
