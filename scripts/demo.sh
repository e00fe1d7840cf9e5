#!/usr/bin/env bash
# The main job: trains a CNN on Fashion-MNIST through Vulkan (samples/fashion_mnist.cpp), after
# showing the device and the two small samples. Installs the Debian packages it needs (the dataset
# among them) when run as root on a fresh machine. Extra arguments go to fashion_mnist
# (e.g. --quick, --steps N, --batch B, --lr LR, --data DIR).
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
echo "== dot"
"$build"/samples/dot
echo "== var"
"$build"/samples/var
echo "== fashion_mnist"
"$build"/samples/fashion_mnist "$@"
