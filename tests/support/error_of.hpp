// error_of(f): the message of the vkg::Error that f throws, or "" if it throws none. Tests
// assert on what a message names (the op, the shapes, the dtypes).
#pragma once
#include <string>

#include <vkgrad/core/error.hpp>

namespace vkg::test {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace vkg::test
