#!/usr/bin/env bash
# CTest's `install` test: installs an already-built vkgrad into a temp prefix, then configures,
# builds and runs the consumer project beside this script against that prefix alone.
# Usage: check_install.sh <vkgrad build dir> [extra compile/link flags for the consumer]
set -euo pipefail
build=$1
flags=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"

# The layout DESIGN.md promises.
for f in include/vkgrad/vkgrad.hpp include/vkgrad/core/error.hpp include/vkgrad/codegen/spirv_compiler.hpp \
         lib/cmake/vkgrad/vkgradConfig.cmake lib/cmake/vkgrad/vkgradConfigVersion.cmake \
         lib/cmake/vkgrad/vkgradTargets.cmake; do
  [ -f "$tmp/prefix/$f" ] || { echo "not installed: $f" >&2; exit 1; }
done
ls "$tmp"/prefix/lib/libvkgrad.so* > /dev/null || { echo "not installed: lib/libvkgrad.so" >&2; exit 1; }
# shaderc and glslang are private to the library: no installed header may need theirs.
if grep -rlE '#include <(shaderc|glslang|spirv-tools)/' "$tmp/prefix/include"; then
  echo "an installed header includes a private dependency" >&2
  exit 1
fi

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$here" -B "$tmp/consumer" "${generator[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$tmp/configure.log" \
  || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }

# The app must load the installed library, not the one in the build tree.
# (ldd's output is captured first: `ldd | grep -q` fails under pipefail whenever grep exits
# before ldd has written everything and ldd dies of SIGPIPE.)
libs=$(ldd "$tmp/consumer/app")
if [[ "$libs" != *"$tmp/prefix/lib/libvkgrad.so"* ]]; then
  echo "$libs" >&2
  echo "the consumer did not link the installed libvkgrad.so" >&2
  exit 1
fi
"$tmp/consumer/app"
