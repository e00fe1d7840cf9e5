// Data-parallel training with vkg::dist: every rank takes its slice of each global batch, and
// the gradients are averaged over ranks before the step, so N ranks reach the weights one process
// reaches on the whole batch. Run it alone and on two ranks and compare the last line:
//   ./data_parallel
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 ./data_parallel
// Rank 0 prints the median step time and a checksum of the weights (equal within float rounding).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <vkgrad/vkgrad.hpp>

int main() {
  using namespace vkg;
  if (!dist::available()) {
    std::printf("this vkgrad was built without MPI: see README, Several processes\n");
    return 0;
  }
  const int64_t batch = 512, features = 256, classes = 10, steps = 20;
  const int ranks = dist::world_size(), rank = dist::rank();
  if (batch % ranks) {
    std::fprintf(stderr, "the batch of %lld does not split over %d ranks\n", (long long)batch,
                 ranks);
    return 1;
  }
  Tensor::manual_seed(1);  // the same initial weights and data on every rank
  nn::Linear l1(features, 128), l2(128, classes);
  std::vector<Tensor> params = nn::parameters(l1, l2);
  nn::SGD opt(params, 0.1, 0.9);
  Tensor x = Tensor::randn({batch, features}).realize();
  Tensor y = Tensor::randn({batch, classes}).realize();
  const int64_t slice = batch / ranks;
  Tensor xs = x.shrink({{rank * slice, (rank + 1) * slice}, {0, features}}).contiguous().realize();
  Tensor ys = y.shrink({{rank * slice, (rank + 1) * slice}, {0, classes}}).contiguous().realize();
  std::vector<double> ms;
  for (int64_t step = 0; step < steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    (l2(l1(xs).relu()) - ys).square().mean().backward();
    if (ranks > 1) dist::all_reduce_gradients(params);  // one bucket: all 35 KB of gradients
    opt.step();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double checksum = 0;
  for (Tensor& p : params)
    for (float v : p.to_vector<float>()) checksum += double(v);
  if (rank == 0)
    std::printf("%d rank(s), global batch %lld: median step %.2f ms; weights checksum %.6f\n",
                ranks, (long long)batch, ms[ms.size() / 2], checksum);
}
