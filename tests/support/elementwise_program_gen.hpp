// The program generator of the elementwise differential fuzzer
// (tests/tensor_differential_fuzz_test.cpp, which says what its programs hold and how they are
// checked), also run by the JIT and symbolic fuzzers through fuzz::elementwise_program. Defined by
// op family: elementwise_program_gen.cpp (the program, its inputs, where, cast, cat, cumsum,
// matmul, constants), elementwise_program_arith.cpp (unary, binary and reduce ops with their
// float64 host references), elementwise_program_layout.cpp (movement, slicing, bitcasts, composed
// ops, assign).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"

namespace vkg::fuzz {

// Where it is documented that the devices may differ, the generator does not go. Each such rule
// names the place that documents it.
class ElementwiseProgramGen {
 public:
  explicit ElementwiseProgramGen(uint32_t seed) : rng_(seed) {}

  Program next();

 private:
  std::mt19937 rng_;
  Program prog_;
  std::vector<Tensor> vals_;  // built on the CPU device while generating, lazily: shapes and dtypes

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(0, 99) < percent; }

  DType random_dtype();
  int64_t random_dim();
  Shape random_shape();
  size_t some_value();

  bool add(std::string text, std::vector<size_t> operands,
           std::function<Tensor(const std::vector<Tensor>&, const std::string&)> make,
           HostFn host = {}, uint64_t host_ulps = 0, bool relative_sum = false);
  void add_input(DType d, Shape s);
  static std::string fmt_input(DType d, const Shape& s, uint32_t seed, bool finite);

  size_t partner(size_t a, std::optional<DType> dtype = {});
  static Shape broadcast_shape_checked(const Shape& a, const Shape& b);

  std::string v(size_t i) { return "v" + std::to_string(i); }

  void try_op();
  void with_constant(size_t a);
  static std::string fmt_double(double d);

  // Op families (elementwise_program_arith.cpp, elementwise_program_layout.cpp).
  void unary(size_t a);
  void binary(size_t a);
  void reduce(size_t a);
  void movement(size_t a);
  void slice(size_t a);
  void bitcast(size_t a);
  void composite(size_t a);
  void assign(size_t a);
};

}  // namespace vkg::fuzz
