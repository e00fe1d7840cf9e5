// vkg::dist's collectives on tensors. Where the device maps its memory into the host (Lavapipe,
// unified memory, the CPU device: core/mapped_memory.hpp), MPI (mpi_group.hpp) reads the input
// tensor's memory and writes the result's fresh buffer in place; elsewhere each goes device ->
// host (bytes()), through MPI in host memory, and back to the tensor's device as a new tensor.
#include <vkgrad/dist/dist.hpp>

#include <cstring>
#include <map>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/dist/mpi_group.hpp>

namespace vkg::dist {

using detail::Bytes;

namespace {

std::string described(const std::string& op, const Tensor& t) {
  return op + " of a tensor of shape " + shape_str(t.shape()) + " (" + t.dtype().name() + ")";
}

Bytes host_bytes(const Tensor& t) { return std::make_shared<std::vector<std::byte>>(t.bytes()); }

Tensor from_bytes(const std::vector<std::byte>& bytes, DType dtype, Shape shape,
                  const std::string& device) {
  return Tensor(std::span<const std::byte>(bytes), bytes.size() / size_t(dtype.itemsize()), dtype,
                std::move(shape), device);
}

// Divides `count` floats of `dtype` at `data` by `n`.
void divide(std::byte* data, size_t count, DType dtype, int n) {
  if (dtype == dtypes::float32) {
    auto* f = reinterpret_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) f[i] /= float(n);
  } else {
    auto* d = reinterpret_cast<double*>(data);
    for (size_t i = 0; i < count; ++i) d[i] /= double(n);
  }
}

// The tensor's mapped memory for MPI to use in place; none with VKG_DIST_STAGED=1, which takes
// the host copies a discrete GPU takes (so that path runs in tests on Lavapipe too).
MappedMemory in_place(Tensor& t) {
  if (setting("VKG_DIST_STAGED")) return {};
  return mapped_memory(t);
}

// Whether a result made on `device` would be mapped: asked before allocating one for MPI to
// write in place, which a discrete GPU's device-local memory would only waste.
bool result_in_place(const std::string& device) {
  return !setting("VKG_DIST_STAGED") && maps_memory(device);
}

void check_mean(ReduceOp op, DType dtype, const std::string& what) {
  if (op == ReduceOp::Mean && dtype != dtypes::float32 && dtype != dtypes::float64)
    throw Error("dist: " + what + ": the mean needs float32 or float64");
}

}  // namespace

bool available() { return true; }
int rank() { return detail::mpi_rank(); }
int world_size() { return detail::mpi_world_size(); }

Tensor all_reduce(const Tensor& t, ReduceOp op) {
  const std::string what = described("all_reduce", t);
  check_mean(op, t.dtype(), what);
  // Where the device maps its memory (Lavapipe, unified memory, the CPU device), MPI reads the
  // tensor and writes the result's fresh buffer in place: no host copy, no upload, no zero-fill
  // (bench_dist: the copies made it 0.2x MPI_Allreduce of a host buffer).
  Tensor in = t;
  if (MappedMemory src = in_place(in)) {
    Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
    if (MappedMemory dst = in_place(out)) {
      detail::all_reduce_sum(src.data, dst.data, src.size, t.dtype(), {src.keep, dst.keep}, what);
      if (op == ReduceOp::Mean) divide(dst.data, size_t(t.numel()), t.dtype(), world_size());
      return out;
    }
  }
  Bytes data = host_bytes(t);
  detail::all_reduce_sum(data, t.dtype(), what);
  if (op == ReduceOp::Mean) divide(data->data(), size_t(t.numel()), t.dtype(), world_size());
  return from_bytes(*data, t.dtype(), t.shape(), t.device());
}

Tensor broadcast(const Tensor& t, int root) {
  const std::string what = described("broadcast from rank " + std::to_string(root), t);
  if (root < 0 || root >= world_size())
    throw Error("dist: " + what + ": there are " + std::to_string(world_size()) + " ranks");
  // The root sends its tensor's memory, and the result on every rank is a fresh buffer that MPI
  // writes in place (the root copies into its own while it sends), where the device maps them;
  // else through host copies. The other ranks never read their t.
  const bool sending = rank() == root;
  const size_t bytes = size_t(t.numel()) * size_t(t.dtype().itemsize());
  Tensor in = t;
  const MappedMemory src = sending ? in_place(in) : MappedMemory{};
  const Bytes staged = sending && !src ? host_bytes(in) : nullptr;
  const std::byte* from = src ? src.data : staged ? staged->data() : nullptr;
  const std::shared_ptr<const void> keep_in =
      src ? std::shared_ptr<const void>(src.keep) : std::shared_ptr<const void>(staged);
  if (result_in_place(t.device())) {
    Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
    if (MappedMemory dst = in_place(out)) {
      detail::broadcast_bytes(from, dst.data, bytes, root, {keep_in, dst.keep}, what);
      return out;
    }
  }
  Bytes data = !sending ? std::make_shared<std::vector<std::byte>>(bytes)
               : staged ? staged
                        : host_bytes(in);
  detail::broadcast_bytes(data, root, what);
  return from_bytes(*data, t.dtype(), t.shape(), t.device());
}

Tensor all_gather(const Tensor& t) {
  const std::string what = described("all_gather", t);
  if (t.ndim() == 0) throw Error("dist: " + what + ": a 0-d tensor has no axis 0 to join along");
  Shape shape = t.shape();
  shape[0] *= world_size();
  // MPI reads t's memory and writes the result's where the device maps them, else host copies.
  Tensor in = t;
  const MappedMemory src = in_place(in);
  const Bytes staged = src ? nullptr : host_bytes(in);
  const std::byte* from = src ? src.data : staged->data();
  const size_t bytes = src ? src.size : staged->size();
  const std::shared_ptr<const void> keep_in =
      src ? std::shared_ptr<const void>(src.keep) : std::shared_ptr<const void>(staged);
  if (result_in_place(t.device())) {
    Tensor out = Tensor::empty(shape, t.dtype(), t.device());
    if (MappedMemory dst = in_place(out)) {
      detail::all_gather_bytes(from, bytes, dst.data, {keep_in, dst.keep}, what);
      return out;
    }
  }
  auto gathered = std::make_shared<std::vector<std::byte>>(bytes * size_t(world_size()));
  detail::all_gather_bytes(from, bytes, gathered->data(), {keep_in, gathered}, what);
  return from_bytes(*gathered, t.dtype(), shape, t.device());
}

void all_reduce_gradients(std::span<Tensor> params, ReduceOp op, size_t bucket_bytes) {
  std::vector<Tensor> grads;
  std::vector<Tensor*> with_grad;
  for (Tensor& p : params)
    if (p.grad()) {
      grads.push_back(*p.grad());
      with_grad.push_back(&p);
    }
  if (grads.empty()) return;
  std::vector<Tensor*> pending;
  for (Tensor& g : grads) pending.push_back(&g);
  vkg::realize(pending);  // one schedule for every gradient
  // Buckets of one dtype, filled in parameter order, so every rank packs them alike.
  struct Bucket {
    DType dtype;
    std::vector<size_t> members;
    size_t bytes = 0;
  };
  std::vector<Bucket> buckets;
  std::map<std::string, size_t> open;  // dtype name -> its bucket being filled
  for (size_t i = 0; i < grads.size(); ++i) {
    const DType d = grads[i].dtype();
    const size_t n = size_t(grads[i].numel()) * size_t(d.itemsize());
    check_mean(op, d, described("all_reduce_gradients", grads[i]));
    auto it = open.find(d.name());
    if (it == open.end() ||
        (buckets[it->second].bytes + n > bucket_bytes && buckets[it->second].bytes > 0)) {
      buckets.push_back({d, {}, 0});
      it = open.insert_or_assign(d.name(), buckets.size() - 1).first;
    }
    buckets[it->second].members.push_back(i);
    buckets[it->second].bytes += n;
  }
  for (const Bucket& b : buckets) {
    auto data = std::make_shared<std::vector<std::byte>>(b.bytes);
    size_t at = 0;
    for (size_t i : b.members) {
      const std::vector<std::byte> g = grads[i].bytes();
      std::memcpy(data->data() + at, g.data(), g.size());
      at += g.size();
    }
    detail::all_reduce_sum(data, b.dtype,
                           "all_reduce_gradients of a bucket of " +
                               std::to_string(b.members.size()) + " gradients (" +
                               std::to_string(b.bytes) + " bytes, " + b.dtype.name() + ")");
    if (op == ReduceOp::Mean)
      divide(data->data(), b.bytes / size_t(b.dtype.itemsize()), b.dtype, world_size());
    at = 0;
    for (size_t i : b.members) {
      const size_t n = size_t(grads[i].numel()) * size_t(b.dtype.itemsize());
      std::vector<std::byte> part(data->begin() + std::ptrdiff_t(at),
                                  data->begin() + std::ptrdiff_t(at + n));
      with_grad[i]->set_grad(from_bytes(part, b.dtype, grads[i].shape(), grads[i].device()));
      at += n;
    }
  }
}

}  // namespace vkg::dist
