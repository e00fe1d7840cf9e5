// The rewrite engine with the symbolic rules on 10,000-node graphs, and the cost of building
// (interning) that many nodes. Items are nodes of the input graph.
//
//   bench_core --benchmark_filter=Rewrite
#include <benchmark/benchmark.h>

#include <vkgrad/core/symbolic.hpp>

using namespace vkg;

namespace {

constexpr size_t kNodes = 10000;

size_t count(const UOpPtr& u) { return toposort(u.get()).size(); }

// acc*3 + i, step after step: three new nodes a step (the product, the constant, the sum), none
// shared with earlier steps, so every make() is a miss that allocates.
UOpPtr intern_chain() {
  UOpPtr acc = UOp::var("x", 0, 1000);
  for (int64_t i = 0; i < int64_t(kNodes) / 3; ++i) acc = acc * 3 + i;
  return acc;
}

// Index arithmetic of the shape a reshape through views produces, step after step: every step
// is folded back to acc + 1 by the div and mod rules, so the rewrite does real work.
UOpPtr index_chain() {
  UOpPtr acc = UOp::var("gidx0", 0, 255);
  for (int i = 0; i % 64 != 0 || count(acc) < kNodes; ++i) {
    UOpPtr l = UOp::var("lidx" + std::to_string(i % 4), 0, 15);
    acc = ((acc * 16 + l) % 65536) / 16 + (l * 2 + 1) % 2;
  }
  return acc;
}

// A sum of distinct scaled variables: the canonical-sum fast path, one term at a time.
// With few distinct variables, most terms are like an earlier one and must be collected.
UOpPtr wide_sum(int distinct) {
  auto var = [&](int i) { return UOp::var("v" + std::to_string(i % distinct), -8, 8); };
  UOpPtr acc = var(0);
  for (int i = 1; i % 64 != 0 || count(acc) < kNodes; ++i) acc = acc + var(i) * (i % 7 + 2) + 1;
  return acc;
}

void BM_InternNewNodes10k(benchmark::State& state) {
  size_t nodes = 0;
  for (auto _ : state) {
    UOpPtr g = intern_chain();
    benchmark::DoNotOptimize(g.get());
    state.PauseTiming();
    nodes = count(g);
    g.reset();  // freed outside the timing
    state.ResumeTiming();
  }
  state.SetItemsProcessed(int64_t(state.iterations() * nodes));
  state.counters["nodes"] = double(nodes);
}
BENCHMARK(BM_InternNewNodes10k)->Unit(benchmark::kMicrosecond);

void BM_InternExistingNodes10k(benchmark::State& state) {
  const UOpPtr keep = intern_chain();  // alive: every make() below finds its node
  for (auto _ : state) benchmark::DoNotOptimize(intern_chain().get());
  state.SetItemsProcessed(int64_t(state.iterations() * count(keep)));
  state.counters["nodes"] = double(count(keep));
}
BENCHMARK(BM_InternExistingNodes10k)->Unit(benchmark::kMicrosecond);

void rewrite(benchmark::State& state, const UOpPtr& g) {
  size_t out_nodes = 0;
  for (auto _ : state) {
    UOpPtr out = graph_rewrite(g, symbolic_rules());
    benchmark::DoNotOptimize(out.get());
    state.PauseTiming();
    out_nodes = count(out);
    out.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(int64_t(state.iterations() * count(g)));
  state.counters["nodes"] = double(count(g));
  state.counters["nodes_after"] = double(out_nodes);
}

void BM_RewriteIndexChain10k(benchmark::State& state) { rewrite(state, index_chain()); }
BENCHMARK(BM_RewriteIndexChain10k)->Unit(benchmark::kMillisecond);

void BM_RewriteWideSumDistinctTerms10k(benchmark::State& state) {
  rewrite(state, wide_sum(100000));
}
BENCHMARK(BM_RewriteWideSumDistinctTerms10k)->Unit(benchmark::kMillisecond);

void BM_RewriteWideSumLikeTerms10k(benchmark::State& state) { rewrite(state, wide_sum(16)); }
BENCHMARK(BM_RewriteWideSumLikeTerms10k)->Unit(benchmark::kMillisecond);

}  // namespace
