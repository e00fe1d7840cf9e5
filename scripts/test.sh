#!/usr/bin/env bash
# Configures, builds and runs the whole test suite on Lavapipe with the validation layer on.
# Installs the Debian packages it needs when run as root on a fresh machine.
# VKG_BUILD_DIR picks the build folder (default build/); extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/check_entry_points.sh
source scripts/deps.sh
vkg_ensure_packages

build=${VKG_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${VKG_CMAKE_ARGS:-}
cmake --build "$build"
# Lavapipe complains about XDG_RUNTIME_DIR when it is unset; give it a private one.
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
ctest --test-dir "$build" --output-on-failure "$@"
