// How a scatter combines a value into the element it lands on: the arg of a tensor-level SCATTER
// (core/indexed_load.hpp) and of the kernel-level STORE it becomes (codegen/program.hpp). One
// definition of what each means, for the CPU interpreter and the GLSL renderer alike:
//   Assign: the value replaces the element (a plain store);
//   Sum, Prod: element + value, element * value, in the element's dtype (integers wrap);
//   Max, Min: IEEE 754-2019 maximum / minimum for floats: nan if either is nan, and +0.0 above
//     -0.0, so that the result never depends on the order values arrive in; plain for integers.
#pragma once
#include <cstdint>

namespace vkg {

enum class ScatterCombine : int64_t { Assign = 0, Sum = 1, Prod = 2, Max = 3, Min = 4 };

}  // namespace vkg
