// Errors name the op the user called, not the op it is built from.
#include <gtest/gtest.h>

#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {

// The message starts with `op` followed by a colon.
testing::AssertionResult names(const std::string& message, const std::string& op) {
  if (message.rfind(op + ":", 0) == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "'" << message << "' does not start with '" << op << ":'";
}

}  // namespace

TEST(ErrorNames, MessagesNameTheOpTheUserCalled) {
  const Tensor x = Tensor::ones({2, 3});
  EXPECT_TRUE(names(error_of([&] { x.softmax(5); }), "softmax"));
  EXPECT_TRUE(names(error_of([&] { x.log_softmax(-3); }), "log_softmax"));
  EXPECT_TRUE(names(error_of([&] { x.layernorm({4}); }), "layernorm"));
  EXPECT_TRUE(names(error_of([&] { Tensor::zeros({-1}); }), "zeros"));
  EXPECT_TRUE(names(error_of([&] { Tensor::ones({2, -1}); }), "ones"));
  EXPECT_TRUE(names(error_of([&] { Tensor::full({-1}, 2.0f); }), "full"));
  EXPECT_TRUE(names(error_of([&] { x.sum().item<int>(); }), "item"));
  EXPECT_TRUE(names(error_of([&] { x.to_vector<int>(); }), "to_vector"));
}
