// vkg::dist in a build without MPI: one process, and collectives that say how to get them.
#include <vkgrad/core/error.hpp>
#include <vkgrad/dist/dist.hpp>

namespace vkg::dist {

namespace {
[[noreturn]] void missing(const char* what) {
  throw Error(std::string("dist: ") + what +
              ": this vkgrad was built without MPI (install libopenmpi-dev and configure with "
              "-DVKG_WITH_MPI=ON)");
}
}  // namespace

bool available() { return false; }
int rank() { return 0; }
int world_size() { return 1; }
Tensor all_reduce(const Tensor&, ReduceOp) { missing("all_reduce"); }
Tensor broadcast(const Tensor&, int) { missing("broadcast"); }
Tensor all_gather(const Tensor&) { missing("all_gather"); }
void all_reduce_gradients(std::span<Tensor>, ReduceOp, size_t) { missing("all_reduce_gradients"); }

}  // namespace vkg::dist
