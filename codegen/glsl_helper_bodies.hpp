// The bodies of the GLSL helpers that compute numbers exactly, for the helper table in
// glsl_helpers.cpp: each returns the scalar definition's body for operand type d (a vkg::Error
// from no_helper for a type it has no form for). Transcendental ones are in
// glsl_helpers_transcendental.cpp; division, square root, fmod and remainder in
// glsl_helpers_arithmetic.cpp.
#pragma once
#include <string>

#include <vkgrad/core/dtype.hpp>

namespace vkg::glsl {

// Throws: helper `name` has no form for `d`.
[[noreturn]] void no_helper(const char* name, DType d);

std::string log2_body(DType d);
std::string exp2_body(DType d);
std::string sin_body(DType d);
std::string cos_body(DType d);
std::string erfc_tail_body(DType d);
std::string erf_body(DType d);
std::string erfc_body(DType d);

std::string fdiv_body(DType d);
// float32 division where the device computes in double (shaderFloat64), and where it also
// divides doubles exactly and rounds them to float as IEEE does.
std::string fdiv_via_double_body();
std::string fdiv_float_of_double_body();
std::string sqrt_body(DType d);
std::string fmod_body(DType d);
std::string remainder_body(DType d);

}  // namespace vkg::glsl
