// The MPI process group under vkg::dist, in host memory: MPI started once (and finalized at
// exit), errors returned rather than aborting, and every collective non-blocking with a deadline,
// so that a rank that died or never came is a vkg::Error and not a hang. Internal to dist/.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <vkgrad/core/dtype.hpp>

namespace vkg::dist::detail {

int mpi_rank();
int mpi_world_size();
// The buffers are shared so that a collective that times out can keep them: MPI may still
// write them after the error.
using Bytes = std::shared_ptr<std::vector<std::byte>>;

// The elements of `dtype` in `data`, summed in place over all ranks.
void all_reduce_sum(const Bytes& data, DType dtype, const std::string& what);
// The same from `in` into `out` (`bytes` each; they may not overlap), memory the caller maps
// (core/mapped_memory.hpp): `keep` holds both alive should the collective time out.
void all_reduce_sum(const std::byte* in, std::byte* out, size_t bytes, DType dtype,
                    std::vector<std::shared_ptr<const void>> keep, const std::string& what);
// Rank `root`'s `data` copied into every rank's (equal sizes).
void broadcast_bytes(const Bytes& data, int root, const std::string& what);
// The same out of place, on memory the caller maps: the root sends `bytes` at `in` and copies them
// into its `out` meanwhile; every other rank receives them into `out` (`in` unused). `keep` holds
// the memory alive should the collective time out.
void broadcast_bytes(const std::byte* in, std::byte* out, size_t bytes, int root,
                     std::vector<std::shared_ptr<const void>> keep, const std::string& what);
// Every rank's `in`, in rank order (world_size * in->size() bytes).
Bytes all_gather_bytes(const Bytes& in, const std::string& what);
// The same from `bytes` at `in` into world_size * `bytes` at `out` (no overlap), memory the
// caller maps; `keep` holds both alive should the collective time out.
void all_gather_bytes(const std::byte* in, size_t bytes, std::byte* out,
                      std::vector<std::shared_ptr<const void>> keep, const std::string& what);

}  // namespace vkg::dist::detail
