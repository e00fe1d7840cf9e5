// ShapeTracker: how a tensor's elements map onto its buffer, as a stack of Views. The first view
// addresses the buffer; each later view addresses the flat (row-major) elements of the one below
// it; the last view gives the tensor's shape. Movement ops are zero-copy: they change the last
// view, and a reshape that one view cannot express (a permuted tensor read back flat) pushes a
// new one. Codegen reads a tracker as an index expression and a validity expression.
//
//   ShapeTracker st = ShapeTracker::from_shape({10, 10}).permute({1, 0}).reshape({100});
//   // ShapeTracker(views=(View(shape=(10, 10), strides=(1, 10), ...), View(shape=(100,), ...)))
//   auto [idx, valid] = st.expr_node();   // render: (((idx0%10)*10)+(idx0//10)), true
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/core/uop.hpp>
#include <vkgrad/core/view.hpp>

namespace vkg {

class ShapeTracker {
 public:
  // Throws vkg::Error if `views` is empty.
  explicit ShapeTracker(std::vector<View> views);
  static ShapeTracker from_shape(const Shape& shape);
  // A contiguous tracker over a symbolic shape (concrete if every expression is a number).
  static ShapeTracker from_sym_shape(const std::vector<UOpPtr>& shape);
  // True when a view holds symbolic sizes.
  bool symbolic() const;

  const std::vector<View>& views() const { return views_; }
  const Shape& shape() const { return views_.back().shape; }
  int64_t size() const { return views_.back().size(); }
  // One view, row-major from offset 0 with nothing masked: the tensor is its buffer.
  bool contiguous() const { return views_.size() == 1 && views_[0].contiguous; }
  // For each dimension, how far one step along it moves in the buffer, where that is one number
  // for the whole tensor (between elements that exist); nullopt where it is not (a dimension
  // split across views) or, unless `ignore_valid`, where a mask or padding depends on that
  // dimension. 0 for broadcast dimensions. Across views this reads the simplified index
  // expression, so it finds what symbolic can fold.
  std::vector<std::optional<int64_t>> real_strides(bool ignore_valid = false) const;
  // The dimensions whose real stride is 1.
  std::vector<int64_t> unit_stride_axes(bool ignore_valid = false) const;

  // Movement ops: same arguments and errors as View's. reshape merges into the last view when
  // one view can express the result and pushes a new view only when it cannot.
  ShapeTracker reshape(const Shape& new_shape) const;
  ShapeTracker permute(const std::vector<int64_t>& order) const;
  ShapeTracker expand(const Shape& new_shape) const;
  ShapeTracker pad(const std::vector<PadWidth>& widths) const;
  ShapeTracker shrink(const Mask& ranges) const;
  ShapeTracker flip(const std::vector<bool>& flipped) const;
  ShapeTracker flip_axes(const std::vector<int64_t>& axes) const;
  ShapeTracker stride(const std::vector<int64_t>& steps) const;
  // Movement ops with symbolic arguments (see View's; named apart from the numeric ones, which
  // a braced list would otherwise make ambiguous); a reshape one view cannot express pushes
  // a contiguous symbolic view.
  ShapeTracker reshape_sym(const std::vector<UOpPtr>& new_shape) const;
  ShapeTracker expand_sym(const std::vector<UOpPtr>& new_shape) const;
  ShapeTracker pad_sym(const std::vector<SymRange>& widths) const;
  ShapeTracker shrink_sym(const std::vector<SymRange>& ranges) const;

  // Merges the top two views into one, repeatedly, while one view expresses both.
  ShapeTracker simplify() const;
  // `top` applied to this tracker's output: top's first view must address this tracker's
  // shape, flat. Views are merged as they are stacked.
  ShapeTracker operator+(const ShapeTracker& top) const;

  // Buffer index and validity of the element at per-dimension indexes `idxs` (one integer UOp per
  // dimension), or at flat row-major index `flat` over the whole shape (which must lie in
  // [0, size)). Without arguments: variables idx0, idx1, ... over each dimension, or one idx0
  // over [0, size). Simplified with vkg::simplify unless `simplified` is false.
  IndexExpr expr_idxs(const std::vector<UOpPtr>& idxs, bool simplified = true) const;
  IndexExpr expr_idxs() const;
  IndexExpr expr_node(const UOpPtr& flat, bool simplified = true) const;
  IndexExpr expr_node() const;

  bool operator==(const ShapeTracker&) const = default;
  size_t hash() const;

  // The tracker as a UOp argument (a VIEW node's), and back: nullptr if `arg` holds none.
  Arg to_arg() const;
  static const ShapeTracker* from_arg(const Arg& arg);

 private:
  ShapeTracker with_last(View v) const;
  std::vector<View> views_;
};

// `outer` read through `inner` (inner's flat elements are what outer addresses) as one View, or
// nullopt when no single View expresses the composition.
std::optional<View> merge_views(const View& inner, const View& outer);

// ShapeTracker(views=(View(shape=(10, 10), strides=(10, 1), offset=0, mask=None,
// contiguous=True),))
std::string to_string(const ShapeTracker& st);
std::ostream& operator<<(std::ostream& os, const ShapeTracker& st);

}  // namespace vkg

template <>
struct std::hash<vkg::ShapeTracker> {
  size_t operator()(const vkg::ShapeTracker& st) const { return st.hash(); }
};
