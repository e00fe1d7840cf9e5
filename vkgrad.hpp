// vkgrad: lazy tensors compiled to fused Vulkan compute kernels. Include this one header.
#pragma once
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit.hpp>
#include <vkgrad/core/rewrite.hpp>
#include <vkgrad/core/shape.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/uop.hpp>
#include <vkgrad/dist/dist.hpp>
#include <vkgrad/nn/conv_layers.hpp>
#include <vkgrad/nn/datasets.hpp>
#include <vkgrad/nn/layers.hpp>
#include <vkgrad/nn/module.hpp>
#include <vkgrad/nn/norm_layers.hpp>
#include <vkgrad/nn/optim.hpp>
#include <vkgrad/nn/safetensors.hpp>
