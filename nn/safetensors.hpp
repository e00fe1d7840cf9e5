// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then the raw row-major
// data. Files written here load in PyTorch's and tinygrad's readers, and theirs load here.
#pragma once
#include <map>
#include <string>

#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

// Writes `tensors` (realizing them) to `path`, with optional string metadata. Names must be
// distinct and non-empty. The file is written under a temp name of its own and renamed into
// place, so readers see a whole file, and of concurrent writers the last one wins whole.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of the file onto `device` (the default device when empty), in the file's
// order. A missing, truncated or malformed file throws vkg::Error naming the file and the problem.
StateDict load_safetensors(const std::string& path, const std::string& device = "");

// The metadata of a file ("__metadata__").
std::map<std::string, std::string> safetensors_metadata(const std::string& path);

}  // namespace vkg::nn
