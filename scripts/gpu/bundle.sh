#!/usr/bin/env bash
# Packs a Release build into .gpu/bundle.tar.xz for a machine that has a GPU but not our
# build: the test and bench binaries, libvkgrad, the non-system libraries they link, the
# Khronos validation layer, and Debian's Vulkan loader. scripts/gpu/run.sh unpacks and runs it.
# Why a bundle: the lent GPU machines have no Debian packages and no network, and a
# working tree that travels there is capped in size; stripped and compressed it is ~20 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=.gpu
exclude=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
grep -qx '/.gpu/' "$exclude" 2>/dev/null || { mkdir -p "$(dirname "$exclude")"; echo /.gpu/ >>"$exclude"; }
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib" "$stage/layer" "$out"
bins=("$build"/tests/test_* "$build"/bench/bench_* "$build"/tools/vkgrad-info)
for b in "${bins[@]}"; do [[ -x $b && -f $b ]] && cp "$b" "$stage/bin/"; done
cp -L "$build"/libvkgrad.so.0 "$stage/lib/"
# Every library the binaries load, less the C runtime the GPU machine's newer distribution has.
for f in "$stage"/bin/* "$stage"/lib/libvkgrad.so.0; do ldd "$f"; done |
  awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libvkgrad)\.so' |
  while read -r l; do cp -L "$l" "$stage/lib/"; done
cp /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$stage/lib/"
cp /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json "$stage/layer/"
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/libvkgrad.so.0 2>/dev/null || true
tar -C "$stage" -cJf "$out/bundle.tar.xz" .
rm -rf "$stage"
ls -la "$out/bundle.tar.xz"
