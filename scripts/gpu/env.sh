# Sourced on the GPU machine, in the repository root, after scripts/gpu/bundle.sh's archive
# travelled there (run's carry: .gpu). Unpacks it into /tmp/vkg and points the dynamic
# loader, the Vulkan loader and the validation layer at it.
set -u
mkdir -p /tmp/vkg && tar -C /tmp/vkg -xJf .gpu/bundle.tar.xz
# NVIDIA's Vulkan driver (libGLX_nvidia) needs glvnd's dispatch libraries, which the image
# lacks: Debian's, fetched beside the repo into .gl (device README), unpack into /.
if compgen -G '.gl/*.deb' >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
export LD_LIBRARY_PATH=/tmp/vkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_ADD_LAYER_PATH=/tmp/vkg/layer
# The NVIDIA image keeps its ICD outside the loader's default search path.
if [[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export PATH=/tmp/vkg/bin:$PATH
