// Where vkgrad keeps what it caches on disk (SPIR-V by source hash, the VkPipelineCache).
#pragma once
#include <filesystem>

namespace vkg {

// $VKG_CACHE_DIR if set, else $XDG_CACHE_HOME/vkgrad, else $HOME/.cache/vkgrad, else a folder
// under the system temp dir. Created on first use; read again from the environment on each call
// so tests can point it elsewhere.
std::filesystem::path cache_dir();

}  // namespace vkg
