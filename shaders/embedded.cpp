#include <vkgrad/shaders/embedded.hpp>

#include <string>

#include <vkgrad/core/error.hpp>

namespace vkg::shaders {

const Embedded& get(std::string_view name) {
  std::string known;
  for (const Embedded& s : all()) {
    if (s.name == name) return s;
    known += known.empty() ? "" : ", ";
    known += s.name;
  }
  throw Error("no embedded shader named '" + std::string(name) + "' (have: " + known + ")");
}

}  // namespace vkg::shaders
