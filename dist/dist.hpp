// vkg::dist: data parallelism across processes and machines, on MPI (Open MPI from Debian). A
// program started by `mpirun -np N ./app` is N ranks; each holds its own devices and tensors, and
// these collectives move tensors between ranks: MPI reads and writes the tensors' memory in place
// where the device maps it into the host (Lavapipe, unified memory, the CPU device), else through
// host copies (device -> host -> MPI -> host -> device). Each result is a new tensor with a buffer
// of its own. vkgrad is built with it where CMake finds MPI (VKG_WITH_MPI, on by default);
// without it, available() is false and the collectives throw vkg::Error.
//
//   loss.backward();
//   dist::all_reduce_gradients(params);        // the mean over ranks, one MPI call per bucket
//   opt.step();
//
// Every collective waits at most VKG_DIST_TIMEOUT seconds (default 120) for the other ranks; past
// that it throws vkg::Error naming the collective and the size (a rank that died or never came),
// and the group may be out of step (local tensors and devices stay usable). MPI starts on first
// use and stops at exit (aborting the job if a timed-out collective never finishes).
#pragma once
#include <cstddef>
#include <span>

#include <vkgrad/core/tensor.hpp>

namespace vkg::dist {

// Whether this build of vkgrad has MPI.
bool available();
// This process's rank in [0, world_size()), and the number of ranks (1 without mpirun).
int rank();
int world_size();

enum class ReduceOp { Sum, Mean };

// The elementwise sum (or mean) of `t` over all ranks, on t's device. Every rank passes a tensor
// of the same shape and dtype (float32, float64, int32 or int64; Mean needs a float).
Tensor all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
// Rank `root`'s value of `t` on every rank (same shape and dtype everywhere; the other ranks'
// values are not read, nor computed).
Tensor broadcast(const Tensor& t, int root = 0);
// Every rank's `t`, concatenated along axis 0 in rank order (same shape and dtype everywhere).
Tensor all_gather(const Tensor& t);

// Replaces the .grad of each parameter by its sum (or mean) over ranks. The gradients are
// realized together, packed by dtype into buckets of at most `bucket_bytes`, and each bucket is
// one MPI all-reduce (not one per tensor). Parameters without a gradient are skipped, and must be
// the same on every rank.
void all_reduce_gradients(std::span<Tensor> params, ReduceOp op = ReduceOp::Mean,
                          size_t bucket_bytes = size_t(32) << 20);

}  // namespace vkg::dist
