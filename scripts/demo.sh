#!/usr/bin/env bash
# The main job. Until the Fashion-MNIST training sample exists, it shows the device and runs the
# samples that exist. Installs the Debian packages it needs when run as root on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
vkg_ensure_packages

# Its own folder: a Release build without tests, so it and test.sh never rebuild each other's tree.
build=${VKG_BUILD_DIR:-build-release}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVKG_BUILD_TESTS=OFF -DVKG_BUILD_BENCH=OFF
cmake --build "$build"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
"$build"/tools/vkgrad-info
for sample in "$build"/samples/*; do
  [ -x "$sample" ] && [ -f "$sample" ] || continue
  echo "== $(basename "$sample")"
  "$sample"
done
