// Reads chosen by index tensors: gather, embedding, take and index_select. Each is one indexed
// load (core/indexed_load.hpp): one kernel, fused with what computes the indices, O(1) work per
// output element. An index outside its axis reads 0 (negative indices count from the end only in
// take, as torch's); CHECK_INDICES=1 makes it an error naming the op, the value and the range.
// Gradients flow to the source through the one-hot scatter-add of indexed_load.
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// The checks every index-taking op shares: integer indices on the tensor's device.
void check_indices(std::string_view op, const Tensor& x, const Tensor& index,
                   std::string_view x_name = "tensor") {
  if (!index.dtype().is_int())
    throw Error(std::string(op) + ": the index must be an integer tensor (" + std::string(x_name) +
                " " + desc(x) + ", index " + desc(index) + ")");
  if (index.device() != x.device())
    throw Error(std::string(op) + ": " + std::string(x_name) +
                " and index are on different devices (" + x.device() + " and " + index.device() +
                ")");
  if (x.has_symbolic_shape() || index.has_symbolic_shape())
    throw Error(std::string(op) + ": symbolic shapes are not supported (" + std::string(x_name) +
                " " + desc(x) + ", index " + desc(index) + ")");
  if (x.numel() > INT32_MAX)
    throw Error(std::string(op) + ": indexes 32-bit element offsets, the " + std::string(x_name) +
                " " + desc(x) + " has more elements");
}

}  // namespace

Tensor Tensor::gather(int64_t axis, const Tensor& index) const {
  const Shape& in = shape();
  const Shape& is = index.shape();
  auto describe = [&] { return " (tensor " + desc(*this) + ", index " + desc(index) + ")"; };
  check_indices("gather", *this, index);
  if (is.size() != in.size())
    throw Error("gather: the index needs as many dimensions as the tensor" + describe());
  if (in.empty()) {  // as torch: a 0-d tensor gathers along its only "axis" with a 0-d index
    if (axis != 0 && axis != -1)
      throw Error("gather: axis " + std::to_string(axis) + " is out of range" + describe());
    return reshape({1}).gather(0, index.reshape({1})).reshape({});
  }
  const int a = normalize_axis(axis, in, "gather");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t d = 0; d < in.size(); ++d) {
    if (int(d) != a && is[d] > in[d])
      throw Error("gather: index dimension " + std::to_string(d) + " is larger than the tensor's" +
                  describe());
    ranges.emplace_back(0, int(d) == a ? in[d] : is[d]);
  }
  check_index_values(
      index, in[size_t(a)], "gather",
      "dimension " + std::to_string(a) + " of size " + std::to_string(in[size_t(a)]));
  const int64_t along[] = {a};
  const Tensor narrow = index_as_int32(index, 0, in[size_t(a)]);
  return indexed_load(shrink(ranges), {&narrow, 1}, along);
}

Tensor Tensor::embedding(const Tensor& weight) const {
  if (weight.device() != device())
    throw Error("embedding: indices and weight are on different devices (" + device() + " and " +
                weight.device() + ")");
  if (!dtype().is_int() || weight.ndim() != 2)
    throw Error("embedding: needs integer indices and a 2-D weight (V, D), got indices " +
                desc(*this) + " and weight " + desc(weight));
  check_indices("embedding", weight, *this, "weight");
  const int64_t v = weight.shape()[0], d = weight.shape()[1], n = numel();
  check_index_values(*this, v, "embedding", "a vocabulary of " + std::to_string(v));
  // Row r of the output reads row index[r] of the weight: the index along axis 0, the same for
  // every column.
  const Tensor rows = index_as_int32(*this, 0, v).reshape({n, 1}).expand({n, d});
  const int64_t along[] = {0};
  Shape out = shape();
  out.push_back(d);
  return indexed_load(weight, {&rows, 1}, along).reshape(out);
}

Tensor Tensor::take(const Tensor& index) const {
  check_indices("take", *this, index);
  const int64_t n = numel();
  // Negative indices count from the end, as torch's take.
  const Tensor flat_index = index_as_int32(index.reshape({index.numel()}), -n, n);
  const Tensor wrapped = flat_index.lt(0).where(flat_index + int32_t(n), flat_index);
  check_index_values(wrapped, n, "take", "a tensor of " + std::to_string(n) + " elements");
  const int64_t along[] = {0};
  return indexed_load(reshape({n}), {&wrapped, 1}, along).reshape(index.shape());
}

Tensor Tensor::index_select(int64_t axis, const Tensor& index) const {
  check_indices("index_select", *this, index);
  if (index.ndim() > 1)
    throw Error("index_select: the index must be 0-d or 1-d (tensor " + desc(*this) + ", index " +
                desc(index) + ")");
  if (ndim() == 0) return reshape({1}).index_select(0, index).reshape({});
  const int a = normalize_axis(axis, shape(), "index_select");
  const int64_t m = index.numel();
  check_index_values(
      index, shape()[size_t(a)], "index_select",
      "dimension " + std::to_string(a) + " of size " + std::to_string(shape()[size_t(a)]));
  Shape out = shape(), along_axis(shape().size(), 1);
  out[size_t(a)] = m;
  along_axis[size_t(a)] = m;
  const Tensor idx = index_as_int32(index, 0, shape()[size_t(a)]).reshape(along_axis).expand(out);
  const int64_t along[] = {a};
  return indexed_load(*this, {&idx, 1}, along);
}

}  // namespace vkg
