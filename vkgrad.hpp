// vkgrad: lazy tensors compiled to fused Vulkan compute kernels. Include this one header.
#pragma once
#include <vkgrad/core/error.hpp>
