// The random program generators of the two differential fuzzers, for the fuzzers that run the same
// programs another way (tests/tensor_jit_fuzz_test.cpp: inside a vkg::Jit). Each is defined at the
// end of its fuzzer's file (the same test binary): elementwise_program in
// tensor_differential_fuzz_test.cpp (elementwise, reduce, movement, cat, matmul, assign),
// op_family_program in tensor_differential_fuzz_ops_test.cpp (conv, pools, gather/scatter, scans,
// sort, casts, pads, shards). The same seed gives the same program as in those fuzzers.
#pragma once
#include <cstdint>

#include "support/differential_fuzz.hpp"

namespace vkg::fuzz {

Program elementwise_program(uint32_t seed);
Program op_family_program(uint32_t seed);

}  // namespace vkg::fuzz
