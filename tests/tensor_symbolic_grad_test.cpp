// Gradients through movement ops with symbolic sizes or arguments (reshape, shrink, pad, expand):
// for i = 1..4 the gradient of a loss through the symbolic op equals the one through the same op
// with plain numbers, on the CPU reference device and on Vulkan, and on Vulkan the backward's
// kernels are compiled for the first i only.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[size_t(k)] = float(((k * 7 + seed * 5) % 13) - 6) / 4.0f;
  return v;
}

const Variable vi("i", 1, 10);

class SymbolicGrad : public testing::TestWithParam<std::string> {
 protected:
  int64_t compiled() const { return device(GetParam()).compile_counts().compiled; }

  // The gradient of sum(f(x)^2) with respect to a leaf x of `shape(i)`, through `symbolic(x, i)`
  // and through `plain(x, i)`, for i = 1..4: equal, and no kernel compiled after i = 1.
  void check(const std::function<Shape(int64_t)>& shape,
             const std::function<Tensor(const Tensor&, int64_t)>& symbolic,
             const std::function<Tensor(const Tensor&, int64_t)>& plain) {
    int64_t later = 0;
    for (int64_t i = 1; i <= 4; ++i) {
      auto grad = [&](const std::function<Tensor(const Tensor&, int64_t)>& f) {
        Tensor x(values(prod(shape(i)), int(i)), shape(i), GetParam());
        x.requires_grad_();
        const Tensor y = f(x, i);
        (y * y * (y + 3)).sum().backward();
        return x.grad()->to_vector<float>();
      };
      const int64_t before = compiled();
      const std::vector<float> got = grad(symbolic);
      if (i > 1) later += compiled() - before;
      const std::vector<float> want = grad(plain);
      ASSERT_EQ(got.size(), want.size()) << "i = " << i;
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_NEAR(got[k], want[k], 1e-5f * (1 + std::fabs(want[k])))
            << "i = " << i << " at " << k;
    }
    EXPECT_EQ(later, 0) << "the symbolic backward compiled kernels again for a new binding";
  }
};

TEST_P(SymbolicGrad, Reshape) {
  check(
      [](int64_t i) {
        return Shape{3, i};
      },
      [](const Tensor& x, int64_t i) {
        return x.reshape({3, vi.bind(i)}) * 2;
      },
      [](const Tensor& x, int64_t) { return x * 2; });
}

// A window at a symbolic offset: the gradient pads by expressions in i.
TEST_P(SymbolicGrad, ShrinkAtASymbolicOffset) {
  check(
      [](int64_t) {
        return Shape{7, 11};
      },
      [](const Tensor& x, int64_t i) {
        const SymInt n = vi.bind(i);
        return x.shrink({{3, 5}, {n, n + 2}});
      },
      [](const Tensor& x, int64_t i) {
        return x.shrink({{3, 5}, {i, i + 2}});
      });
}

// A symbolic tensor shrunk to a symbolic size.
TEST_P(SymbolicGrad, ShrinkOfASymbolicTensor) {
  check(
      [](int64_t i) {
        return Shape{3, i + 2};
      },
      [](const Tensor& x, int64_t i) {
        const SymInt n = vi.bind(i);
        return x.reshape({3, n + 2}).shrink({{0, 3}, {1, n + 1}});
      },
      [](const Tensor& x, int64_t i) {
        return x.shrink({{0, 3}, {1, i + 1}});
      });
}

TEST_P(SymbolicGrad, PadBySymbolicWidths) {
  check(
      [](int64_t i) {
        return Shape{3, i};
      },
      [](const Tensor& x, int64_t i) {
        const SymInt n = vi.bind(i);
        return x.reshape({3, n}).pad({{1, 0}, {n, 2}});
      },
      [](const Tensor& x, int64_t i) {
        return x.pad({{1, 0}, {i, 2}});
      });
}

// Widths that are negative at some bindings trim, as torch's F.pad: (2 - i, i - 3) on an axis of
// 6 is (1, -2) at i = 1 and (-2, 1) at i = 4. The backward shrank by the widths as though they
// were pads, and threw ("range [-2, 4) is outside dimension 1") where one is negative.
TEST_P(SymbolicGrad, PadByWidthsThatAreNegativeAtSomeBindings) {
  check(
      [](int64_t) {
        return Shape{3, 6};
      },
      [](const Tensor& x, int64_t i) {
        const SymInt n = vi.bind(i);
        return x.pad({{0, 0}, {SymInt(2) - n, n - SymInt(3)}});
      },
      [](const Tensor& x, int64_t i) {
        return x.pad({{0, 0}, {2 - i, i - 3}});
      });
}

// A column expanded to i columns: its gradient sums them.
TEST_P(SymbolicGrad, ExpandToASymbolicSize) {
  check(
      [](int64_t) {
        return Shape{3, 1};
      },
      [](const Tensor& x, int64_t i) {
        return x.expand({3, vi.bind(i)});
      },
      [](const Tensor& x, int64_t i) {
        return x.expand({3, i});
      });
}

// Two variables: a cat of (3, i) and (3, j), and a pad of (3, i) by j, each meeting a plain
// (3, i + j) tensor. Broadcasting relabels the plain 5 as i + j with an EXPAND of equal sizes,
// whose gradient was summed to (3, 1) ("the gradient rule of EXPAND gave shape (3, 1) for a
// source of shape (3, 5) (internal)"). i + j stays 5, so the plain tensor keeps its shape and the
// backward compiles once.
TEST_P(SymbolicGrad, CatAndPadOfTwoVariables) {
  const Variable vj("j", 1, 10);
  int64_t later = 0;
  for (auto [i, j] : {std::pair<int64_t, int64_t>{1, 4}, {3, 2}, {2, 3}, {4, 1}}) {
    auto grads = [&](bool sym) {
      Tensor a(values(3 * i, 1), {3, i}, GetParam()), b(values(3 * j, 2), {3, j}, GetParam());
      a.requires_grad_();
      b.requires_grad_();
      const Tensor as = sym ? a.reshape({3, vi.bind(i)}) : a;
      const Tensor bs = sym ? b.reshape({3, vj.bind(j)}) : b;
      const Tensor plain(values(3 * (i + j), 3), {3, i + j}, GetParam());
      const Tensor cat = Tensor::cat(std::vector<Tensor>{as, bs}, 1) * plain;
      const Tensor pad =
          (sym ? as.pad({{0, 0}, {vj.bind(j), 0}}) : a.pad({{0, 0}, {j, 0}})) + plain;
      (cat * cat * (cat + 3) + pad * pad).sum().backward();
      std::vector<float> g = a.grad()->to_vector<float>();
      const std::vector<float> h = b.grad()->to_vector<float>();
      g.insert(g.end(), h.begin(), h.end());
      return g;
    };
    const int64_t before = compiled();
    const std::vector<float> got = grads(true);
    if (i != 1) later += compiled() - before;
    const std::vector<float> want = grads(false);
    ASSERT_EQ(got.size(), want.size()) << "i = " << i << ", j = " << j;
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_NEAR(got[k], want[k], 1e-5f * (1 + std::fabs(want[k])))
          << "i = " << i << ", j = " << j << " at " << k;
  }
  EXPECT_EQ(later, 0) << "the symbolic backward compiled kernels again for a new binding";
}

INSTANTIATE_TEST_SUITE_P(Devices, SymbolicGrad, testing::Values("CPU", "VK"));

}  // namespace
