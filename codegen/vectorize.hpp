// Lane vectorizing: the lowerer writes an upcast axis as separate scalar copies of the kernel's
// expression, one per lane; this turns a group of such lanes (2..4, the innermost upcast axis)
// back into one expression of vector dtype where the lanes line up: the same ALU op in every lane
// becomes one vector op, loads of consecutive elements one vector LOAD, equal constants a vector
// CONST, per-lane accumulators one vector accumulator, and a scalar every lane shares a VECTORIZE
// broadcast. Lanes that do not line up (loads of scattered elements, different ops) make the
// whole group stay scalar: gathering scalars into a vector would cost more than it saves. Vector
// loads and stores are what let a device move 16 bytes per access (Lavapipe
// pays per access and lane, not per byte).
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

class LaneVectorizer {
 public:
  // `next_acc` numbers new accumulators; it is advanced past the ids used.
  explicit LaneVectorizer(int64_t& next_acc) : next_acc_(next_acc) {}

  // One value of dtype T.vec(lanes.size()) equal, lane by lane, to `lanes` (scalars of one dtype),
  // or nullptr when they do not line up.
  UOpPtr vectorize(const std::vector<UOpPtr>& lanes);

  // Whether lane k's index is lane 0's plus k, and no lane is masked: then a vector LOAD or STORE
  // at lane 0's INDEX covers them all.
  static bool consecutive(const std::vector<UOpPtr>& indexes);

 private:
  UOpPtr vectorize_uncached(const std::vector<UOpPtr>& lanes);

  int64_t& next_acc_;
  std::map<std::vector<const UOp*>, UOpPtr> memo_;
  std::vector<std::vector<UOpPtr>> keep_;  // keeps memo keys alive
};

}  // namespace vkg
