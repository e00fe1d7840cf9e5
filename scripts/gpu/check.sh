#!/usr/bin/env bash
# One prepared pass on a lent GPU machine (see scripts/gpu/bundle.sh): what the driver
# reports, every Vulkan test suite sharded over the cores with the validation layer on, and
# the speed benchmarks whose defaults depend on the device type. Logs go to $OUT.
# usage: bash scripts/gpu/check.sh [tests] [bench] [copy] [variants]   (default: all four)
set -u
source scripts/gpu/env.sh
out=${OUT:-/tmp/vkg/out}; mkdir -p "$out"
parts=${*:-tests bench copy variants}
shards=${SHARDS:-12}
(nvidia-smi -L; vkgrad-info) 2>&1 | tee "$out/info.txt" | head -40
if ! vkgrad-info >/dev/null 2>&1; then
  echo "no Vulkan device: the loader's account follows"
  VK_LOADER_DEBUG=error,warn,driver vkgrad-info 2>&1 | tail -30
  ls -la /usr/local/nvidia/share/vulkan/icd.d/ /usr/share/vulkan/icd.d/ 2>&1; ldd $(find / -name 'libGLX_nvidia.so.0' 2>/dev/null | head -1) | grep -i 'not found'
  exit 1
fi

# Runs a gtest binary in $shards processes at once; prints failures and a summary line.
sharded() {
  local bin=$1 tag=$2 logs=/tmp/vkg/logs/$2; shift 2
  mkdir -p "$logs"; local t0=$SECONDS
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i env VKG_VALIDATION=1 "$@" \
      timeout ${SHARD_TIMEOUT:-200} "$bin" --gtest_brief=1 >"$logs/$i.log" 2>&1 &
  done
  wait
  local failed; failed=$(grep -h '^\[  FAILED  \] [A-Za-z]' "$logs"/*.log | grep -v 'listed below' | sort -u)
  local passed; passed=$(grep -h '^\[  PASSED  \]' "$logs"/*.log | awk '{s+=$4} END {print s+0}')
  local crashed; crashed=$(grep -L '^\[  PASSED  \]\|^\[  FAILED  \]' "$logs"/*.log | wc -l)
  echo "== $tag: passed $passed, failed $(echo -n "$failed" | grep -c .), shards without a summary $crashed, $((SECONDS - t0)) s"
  [[ -n $failed ]] && echo "$failed" | head -40 | tee -a "$out/failures.txt"
  cat "$logs"/*.log >>"$out/tests.log"
}

if [[ $parts == *tests* ]]; then
  # The allocator's fill takes the whole device heap (tests/vk_memory_test.cpp): apart from the
  # shards, whose tests would run out of memory beside it.
  heap_fill='VkAllocator.MoreThanTheHeapThrowsOutOfMemoryAndTheAllocatorStaysUsable'
  sharded /tmp/vkg/bin/test_vk vk GTEST_FILTER="-$heap_fill"
  shards=1 sharded /tmp/vkg/bin/test_vk vk_heap_fill GTEST_FILTER="$heap_fill"
  sharded /tmp/vkg/bin/test_codegen codegen
  sharded /tmp/vkg/bin/test_tensor tensor
  sharded /tmp/vkg/bin/test_nn nn
fi
bench() { "$@" --benchmark_min_time=${MIN_TIME:-0.2} --benchmark_repetitions=${REPS:-3} \
  --benchmark_report_aggregates_only=true 2>&1 | grep -E 'median|^BM|Error|error' | grep -v '_mean\|_stddev\|_cv' ; }
if [[ $parts == *bench* ]]; then
  for t in 0 1; do echo "== VKG_TEXEL_LOADS=$t"
    VKG_TEXEL_LOADS=$t bench bench_nn --benchmark_filter='MlpAdamStep|BeautifulMnistTrainStep'
  done | tee "$out/bench.txt"
  bench bench_vk --benchmark_filter='TexelLoads_Gen|EmptyDispatch|AddF32_16Mi$' | tee -a "$out/bench.txt"
  bench bench_tensor --benchmark_filter='Matmul|Reference|FusedChain|Sum_16Mi|Attention' | tee -a "$out/bench.txt"
fi
# Copies (issue 11). CopyOverlapsKernel/4096: an upload of 256 MiB while 4 matmuls of 4096^2 run;
# overlap ~1 means it ran on the copy engine under the kernels (both_ms ~ the longer of kernel_ms
# and copy_ms), ~0 one after the other, as in the VKG_NO_TRANSFER_QUEUE=1 run that follows. The
# tests part's test_vk VkQueueFamilies.OnACopyEngineAnUploadRunsWhileKernelsRun passes (is not
# skipped) where an upload finished while 20,000 chained kernels still ran.
if [[ $parts == *copy* ]]; then
  bench bench_tensor --benchmark_filter='Copy_|CopyOverlapsKernel/4096|ReadBehind|TwoDeviceJit' |
    tee "$out/copy.txt"
  echo "== VKG_NO_TRANSFER_QUEUE=1" | tee -a "$out/copy.txt"
  VKG_NO_TRANSFER_QUEUE=1 bench bench_tensor --benchmark_filter='CopyOverlapsKernel/4096' |
    tee -a "$out/copy.txt"
  bench bench_vk --benchmark_filter='Upload|Download' | tee -a "$out/copy.txt"
fi
if [[ $parts == *variants* ]]; then
  sharded /tmp/vkg/bin/test_tensor tensor_texel VKG_TEXEL_LOADS=1
  sharded /tmp/vkg/bin/test_tensor tensor_staging VKG_FORCE_STAGING=1
fi
