#!/usr/bin/env bash
# Issue 11's copy checks for a real GPU (a discrete one: device-local memory, a copy-engine queue),
# which Lavapipe in CI cannot show. Run from the repository root with a Release build in $BUILD
# (default build-release): about a minute on an H100. What to read:
#  - test_vk VkQueueFamilies.OnACopyEngineAnUploadRunsWhileKernelsRun must PASS, not be SKIPPED:
#    an upload on the copy engine finished while 20,000 chained kernels still ran (overlap seen).
#  - test_tensor's AsyncCopy.ACopyInto/OutOfDeviceLocalMemory... run (not skipped) on device-local
#    memory: copies between devices through staging buffers, off the realizing thread.
#  - bench_tensor CopyOverlapsKernel/4096: overlap=~1 means the 256 MiB upload hid under the 4
#    matmuls (both_ms ~ max(kernel_ms, copy_ms)); the second run, VKG_NO_TRANSFER_QUEUE=1, is the
#    one-queue baseline (overlap ~0, both_ms ~ kernel_ms + copy_ms).
#  - bench_tensor Copy_*: GB/s and vs_memcpy (the goal figures: VK -> CPU, VK:0 -> VK:1).
set -uo pipefail
B=${BUILD:-build-release}
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
"$B/tests/test_vk" --gtest_filter='VkQueueFamilies.*'
"$B/tests/test_tensor" \
  --gtest_filter='AsyncCopy*:TensorDevice*:TensorShard*:Devices/Assign*:AsyncRealize*:AsyncJit*'
"$B/bench/bench_tensor" --benchmark_filter='Copy_|CopyOverlapsKernel/4096'
VKG_NO_TRANSFER_QUEUE=1 "$B/bench/bench_tensor" --benchmark_filter='CopyOverlapsKernel/4096'
