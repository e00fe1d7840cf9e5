// Embedding lookup (issue 10's goal): 4096 int32 indices into a 50,000 x 512 float table, as an
// indexed load (one kernel, O(1) per output element), timed against a plain device copy of its
// 4096 x 512 output (Tensor::clone of a realized tensor: one copy kernel) in the same iterations:
// vs_copy is the embedding's time over the copy's (goal: at most 2). BM_Embedding_OneHot is the
// form embedding had before (compare each index with an arange over the vocabulary, keep the
// matching row, sum the vocabulary away: O(V) per element), at smaller vocabularies since it
// grows linearly with V; its vs_copy is against the same copy. Timed by wall clock around
// Tensor::realize() (schedule, dispatch, wait); inputs are realized and kernels compiled first.
// The backward benchmarks are below.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg::bench {
namespace {

constexpr int64_t kIndices = 4096, kDim = 512;

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Tensor table(int64_t vocab) {
  std::vector<float> host(size_t(vocab * kDim));
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i % 1000) * 0.001f;
  Tensor t(host, {vocab, kDim});
  t.realize();
  return t;
}

Tensor indices(int64_t vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> host(kIndices);
  for (int32_t& v : host) v = int32_t(std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng));
  Tensor t(host, {kIndices});
  t.realize();
  return t;
}

// The old embedding, as it was written in core/tensor_nn.cpp.
Tensor one_hot_embedding(const Tensor& idx, const Tensor& weight) {
  const int64_t v = weight.shape()[0], d = weight.shape()[1];
  const Tensor mask = idx.reshape({kIndices, 1, 1}).eq(Tensor::arange(0, v, 1).reshape({1, v, 1}));
  return mask.where(weight.reshape({1, v, d}), Tensor::full({}, 0, weight.dtype())).sum(-2);
}

// Runs `lookup` against the copy each iteration; reports output GB/s (bytes written plus the
// rows read) and the time ratio to the copy.
template <class F>
void versus_copy(benchmark::State& state, F&& lookup) {
  Tensor out = lookup();  // compiles
  out.realize();
  const auto copy = [&] { out.clone().realize(); };
  copy();
  double t_copy = 0, t_lookup = 0;
  for (auto _ : state) {
    t_copy += seconds(copy);
    const double t = seconds([&] { lookup().realize(); });
    t_lookup += t;
    state.SetIterationTime(t);
  }
  const double n = double(state.iterations()), bytes = 2.0 * kIndices * kDim * 4;
  state.counters["GB/s"] = bytes * n / t_lookup * 1e-9;
  state.counters["copy_ms"] = t_copy / n * 1e3;
  state.counters["vs_copy"] = t_lookup / t_copy;
}

void BM_Embedding_IndexedLoad(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const Tensor w = table(vocab), idx = indices(vocab);
  versus_copy(state, [&] { return idx.embedding(w); });
}
BENCHMARK(BM_Embedding_IndexedLoad)->Arg(50000)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Embedding_OneHot(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  const Tensor w = table(vocab), idx = indices(vocab);
  versus_copy(state, [&] { return one_hot_embedding(idx, w); });
}
BENCHMARK(BM_Embedding_OneHot)->Arg(500)->Arg(2000)->UseManualTime()->Unit(benchmark::kMillisecond);
// The goal's full 50,000-row table in the one-hot form: one iteration (tens of seconds on Lavapipe).
BENCHMARK(BM_Embedding_OneHot)
    ->Name("BM_Embedding_OneHot_FullTable")
    ->Arg(50000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Embedding's backward (the gradient of the table): a scatter-add of the 4096 x 512 output
// gradient into a zero 50,000 x 512 table, two kernels (the zeros, one atomic add per gradient
// element). Timed in the same iterations as the forward lookup and as a fill of the table
// with zeros (its floor: the gradient is dense, as torch's): vs_forward and vs_fill are the
// backward's time over theirs. BM_EmbeddingBackward_OneHot is the form it had before (the
// transpose of the one-hot: compare each index with an arange over the vocabulary and sum the
// 4096 indices away, O(V) per table element... O(N) per element of the V x 512 gradient), at
// smaller vocabularies.
Tensor one_hot_embedding_backward(const Tensor& idx, const Tensor& g, int64_t vocab) {
  const Tensor hit =
      idx.reshape({kIndices, 1, 1}).eq(Tensor::arange(0, vocab, 1).reshape({1, vocab, 1}));
  return hit.where(g.reshape({kIndices, 1, kDim}), Tensor::full({}, 0, g.dtype())).sum(0);
}

template <class F>
void backward_versus_forward(benchmark::State& state, int64_t vocab, F&& backward) {
  const Tensor w = table(vocab), idx = indices(vocab);
  Tensor g = Tensor::randn({kIndices, kDim}).contiguous();
  g.realize();
  const auto forward = [&] { idx.embedding(w).realize(); };
  const auto fill = [&] { Tensor::zeros({vocab, kDim}).contiguous().realize(); };
  forward();
  fill();
  backward(idx, g).realize();  // compiles
  double t_forward = 0, t_fill = 0, t_backward = 0;
  for (auto _ : state) {
    t_forward += seconds(forward);
    t_fill += seconds(fill);
    const double t = seconds([&] { backward(idx, g).realize(); });
    t_backward += t;
    state.SetIterationTime(t);
  }
  const double n = double(state.iterations());
  state.counters["forward_ms"] = t_forward / n * 1e3;
  state.counters["fill_ms"] = t_fill / n * 1e3;
  state.counters["vs_forward"] = t_backward / t_forward;
  state.counters["vs_fill"] = t_backward / t_fill;
}

void BM_EmbeddingBackward_Scatter(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  backward_versus_forward(state, vocab, [&](const Tensor& idx, const Tensor& g) {
    Tensor w = Tensor::zeros({vocab, kDim}).requires_grad_();  // a leaf; its values are unused
    (idx.embedding(w) * g).sum().backward();
    return *w.grad();
  });
}
BENCHMARK(BM_EmbeddingBackward_Scatter)
    ->Arg(2000)
    ->Arg(50000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_EmbeddingBackward_OneHot(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  backward_versus_forward(state, vocab, [&](const Tensor& idx, const Tensor& g) {
    return one_hot_embedding_backward(idx, g, vocab);
  });
}
BENCHMARK(BM_EmbeddingBackward_OneHot)
    ->Arg(500)
    ->Arg(2000)
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// The goal's full table in the one-hot form: one iteration (minutes on Lavapipe).
BENCHMARK(BM_EmbeddingBackward_OneHot)
    ->Name("BM_EmbeddingBackward_OneHot_FullTable")
    ->Arg(50000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg::bench
