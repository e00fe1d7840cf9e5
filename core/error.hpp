// The exceptions vkgrad throws for errors a user can cause. Every one derives from vkg::Error and
// says what went wrong in the user's terms (the op, the shapes, the dtypes); after one is thrown
// the library stays usable.
#pragma once
#include <stdexcept>
#include <string>

namespace vkg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A kernel's source did not compile. what() holds the numbered source and the compiler's message.
class CompileError : public Error {
 public:
  using Error::Error;
};

// The device (or the host, for host-visible memory) could not satisfy an allocation.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

// The Vulkan device was lost (driver crash, reset, or a hang that timed out).
class DeviceLost : public Error {
 public:
  using Error::Error;
};

}  // namespace vkg
