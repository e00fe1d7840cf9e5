# Sourced by test.sh and demo.sh: makes sure the Debian packages vkgrad needs are installed.
# As root it installs what is missing; otherwise it names what is missing and stops.

VKG_PACKAGES=(
  g++ cmake ninja-build pkg-config          # the toolchain (a minimal Debian has none of it)
  libvulkan-dev                             # Vulkan loader and headers
  mesa-vulkan-drivers                       # Lavapipe: a Vulkan device on any CPU
  vulkan-validationlayers                   # the Khronos validation layer the tests run under
  libshaderc-dev glslang-dev spirv-tools    # GLSL -> SPIR-V at run time (shaderc + its archives); spirv-val for test_codegen
  glslang-tools                             # glslangValidator: the runtime's own shaders at build time
  libfmt-dev                                # string formatting
  libgtest-dev                              # the test suites
  libbenchmark-dev                          # bench/
  zlib1g-dev                                # gunzipping datasets (nn/datasets)
  nlohmann-json3-dev                        # safetensors headers (nn/safetensors)
  dataset-fashion-mnist                     # the demo trains on it; a test reads it
  libopenmpi-dev openmpi-bin                # vkg::dist across processes (optional: VKG_WITH_MPI)
  libonnx-dev libprotobuf-dev               # vkg::onnx: ONNX's generated protobuf classes (optional: VKG_WITH_ONNX)
  libonnx-testdata                          # the ONNX backend conformance tests (tests/onnx/conformance.cpp)
)

vkg_ensure_packages() {
  # Not Debian (no dpkg): nothing to check; CMake names whatever is missing.
  command -v dpkg-query > /dev/null || return 0
  local missing=()
  for pkg in "${VKG_PACKAGES[@]}" "$@"; do
    local status
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "vkgrad needs these Debian packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "Installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
}
