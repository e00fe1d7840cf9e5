// vkg::Jit over a symbolic size: one attention step, softmax(q k^T / 8) v over `len` tokens of
// width 64, with len a Variable in [1, 512] that each call binds anew.
//
//  - Replay vs BareSubmit: the host cost of a replay that rebinds the variable (new inputs
//    uploaded into the captured buffers, the variable's int32s rewritten in the recorded kernels'
//    argument buffers) against submitting the same command buffer and waiting for it.
//  - Replay vs Plain: what compiling once for every len costs against a Jit captured for plain
//    sizes of the same len: index math over variables and a guarded last workgroup (a launch
//    covers only the binding's workgroups). Both NOOPT, so that the kernels differ only in that
//    (symbolic kernels take fewer opts than plain ones).
#include <benchmark/benchmark.h>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg::bench {
namespace {

constexpr int64_t kWidth = 64, kMaxLen = 512;
const Variable kLen("len", 1, kMaxLen);

std::vector<Tensor> attention(const std::vector<Tensor>& in) {
  return {(in[0].dot(in[1].transpose()) / 8.0f).softmax(-1).dot(in[2])};
}

std::vector<float> values(int64_t n) {
  std::vector<float> v(size_t(n * kWidth));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 17) - 8) / 8.0f;
  return v;
}

// q, k and v of `len` tokens from host memory, symbolic in len (or plain).
std::vector<Tensor> inputs(int64_t len, bool symbolic) {
  std::vector<Tensor> out;
  for (int k = 0; k < 3; ++k) {
    Tensor t(values(len), {len, kWidth});
    out.push_back(symbolic ? t.reshape({kLen.bind(len), kWidth}) : t);
  }
  return out;
}

// Calls alternate between len and len - 1, so that every replay binds a new value.
void BM_SymbolicAttention_Replay(benchmark::State& state) {
  ScopedSetting noopt("NOOPT", 1);
  const int64_t len = state.range(0);
  Jit jit(attention);
  jit(inputs(len, true));
  jit(inputs(len - 1, true));  // captured
  int64_t call = 0;
  for (auto _ : state) benchmark::DoNotOptimize(jit(inputs(len - (call++ % 2), true)));
  state.counters["kernels"] = double(jit.kernels());
}
BENCHMARK(BM_SymbolicAttention_Replay)->Arg(16)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The floor of a replay: the captured command buffer submitted and waited for, nothing else.
void BM_SymbolicAttention_BareSubmit(benchmark::State& state) {
  ScopedSetting noopt("NOOPT", 1);
  const int64_t len = state.range(0);
  Jit jit(attention);
  jit(inputs(len, true));
  jit(inputs(len, true));
  Device& device = *jit.device();
  Recording& recording = *jit.recording();
  for (auto _ : state) benchmark::DoNotOptimize(device.replay(recording));
}
BENCHMARK(BM_SymbolicAttention_BareSubmit)->Arg(16)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same step captured for plain sizes: grids of exactly len's size.
void BM_PlainAttention_Replay(benchmark::State& state) {
  ScopedSetting noopt("NOOPT", 1);
  const int64_t len = state.range(0);
  Jit jit(attention);
  jit(inputs(len, false));
  jit(inputs(len, false));
  for (auto _ : state) benchmark::DoNotOptimize(jit(inputs(len, false)));
}
BENCHMARK(BM_PlainAttention_Replay)->Arg(16)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace vkg::bench
