// The host cost of building eager ops over symbolic sizes, outside any vkg::Jit capture: one
// attention block over `len` tokens of width 64 (len a Variable in [1, 512]), with the ops that
// check their arguments against the bound value (core/binding_guard.hpp): a matmul's inner sizes,
// softmax's max and sum, layernorm's mean, a broadcast of a plain size equal to len, a pad, a
// shrink, a cat and a reshape. Only the lazy graph is built (nothing is realized): the timed part
// is what every eager call over symbolic sizes pays before its schedule, the guards' messages
// included where they are built outside a capture.
#include <benchmark/benchmark.h>

#include <vkgrad/vkgrad.hpp>

namespace vkg::bench {
namespace {

constexpr int64_t kWidth = 64;
const Variable kLen("len", 1, 512);

// x: (len, 64); column: a plain (len, 1).
Tensor block(const Tensor& x, const Tensor& column) {
  const SymInt len = x.sym_shape()[0];
  const Tensor scores = (x.dot(x.transpose()) / 8.0f).softmax(-1);
  Tensor y = scores.dot(x).layernorm() + column;
  y = y.pad({{SymInt(1), SymInt(0)}, {SymInt(0), SymInt(0)}})
          .shrink({{SymInt(0), len}, {0, kWidth}});
  y = Tensor::cat(std::vector<Tensor>{y, x}, 1).reshape({len, SymInt(2), SymInt(kWidth)});
  return y.max(1) + y.sum(1);
}

void BM_SymbolicEagerGraph(benchmark::State& state) {
  const int64_t len = state.range(0);
  const Tensor x = Tensor::ones({len, kWidth}).reshape({kLen.bind(len), kWidth});
  const Tensor column = Tensor::ones({len, 1});
  for (auto _ : state) benchmark::DoNotOptimize(block(x, column).node());
}
BENCHMARK(BM_SymbolicEagerGraph)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

// The same block on plain sizes: the floor of building its graph.
void BM_PlainEagerGraph(benchmark::State& state) {
  const int64_t len = state.range(0);
  const Tensor x = Tensor::ones({len, kWidth});
  const Tensor column = Tensor::ones({len, 1});
  for (auto _ : state) benchmark::DoNotOptimize(block(x, column).node());
}
BENCHMARK(BM_PlainEagerGraph)->Arg(16)->Arg(128)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vkg::bench
