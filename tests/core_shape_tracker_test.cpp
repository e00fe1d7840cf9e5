// ShapeTracker: when reshape merges into the last view and when it stacks a new one, merging
// views back (simplify, +), index and validity expressions, real strides, the printer, errors,
// and the tracker as a UOp argument.
#include <gtest/gtest.h>

#include <unordered_set>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/symbolic.hpp>

using namespace vkg;

namespace {

// The buffer index each element reads, row-major, with -1 for padding: the tracker evaluated
// through expr_node at every flat index.
std::vector<int64_t> read_flat(const ShapeTracker& st) {
  const IndexExpr e = st.expr_node();
  std::vector<int64_t> out;
  for (int64_t k = 0; k < st.size(); ++k) {
    const std::map<std::string, int64_t> at{{"idx0", k}};
    out.push_back(eval_int(e.valid, at) ? eval_int(e.index, at) : -1);
  }
  return out;
}

// The same through expr_idxs, one variable per dimension.
std::vector<int64_t> read_dims(const ShapeTracker& st) {
  const IndexExpr e = st.expr_idxs();
  std::vector<int64_t> out;
  const Shape& shape = st.shape();
  for (int64_t k = 0; k < st.size(); ++k) {
    std::map<std::string, int64_t> at;
    for (int64_t i = int64_t(shape.size()) - 1, rest = k; i >= 0; rest /= shape[size_t(i)], --i)
      at["idx" + std::to_string(i)] = rest % shape[size_t(i)];
    out.push_back(eval_int(e.valid, at) ? eval_int(e.index, at) : -1);
  }
  return out;
}

using Opt = std::optional<int64_t>;
using Strides = std::vector<Opt>;

}  // namespace

TEST(ShapeTracker, FromShapeIsOneContiguousView) {
  const ShapeTracker st = ShapeTracker::from_shape({10, 10});
  EXPECT_TRUE(st.contiguous());
  EXPECT_EQ(st.shape(), (Shape{10, 10}));
  EXPECT_EQ(st.size(), 100);
  EXPECT_EQ(to_string(st),
            "ShapeTracker(views=(View(shape=(10, 10), strides=(10, 1), offset=0, mask=None, "
            "contiguous=True),))");
  EXPECT_THROW(ShapeTracker({}), Error);
}

// Seed 004: a transpose read back flat needs a second view, and its index is a div and a mod.
TEST(ShapeTracker, TransposeReadFlatStacksAViewAsTinygradDoes) {
  ShapeTracker a = ShapeTracker::from_shape({10, 10}).permute({1, 0});
  EXPECT_EQ(to_string(a),
            "ShapeTracker(views=(View(shape=(10, 10), strides=(1, 10), offset=0, mask=None, "
            "contiguous=False),))");
  a = a.reshape({5, 2, 5, 2});
  EXPECT_EQ(to_string(a),
            "ShapeTracker(views=(View(shape=(5, 2, 5, 2), strides=(2, 1, 20, 10), offset=0, "
            "mask=None, contiguous=False),))");
  a = a.reshape({100});
  EXPECT_EQ(to_string(a),
            "ShapeTracker(views=(View(shape=(5, 2, 5, 2), strides=(2, 1, 20, 10), offset=0, "
            "mask=None, contiguous=False), "
            "View(shape=(100,), strides=(1,), offset=0, mask=None, contiguous=True)))");
  EXPECT_EQ(a.simplify(), a);  // no single view reads a transpose flat
  EXPECT_FALSE(a.contiguous());

  const IndexExpr e = a.expr_node(UOp::var("idx0", 0, 99));
  EXPECT_EQ(render(e.index), "(((idx0%10)*10)+(idx0//10))");
  EXPECT_EQ(e.valid, UOp::const_(dtypes::bool_, true));
  std::vector<int64_t> transposed;
  for (int64_t k = 0; k < 100; ++k) transposed.push_back(k % 10 * 10 + k / 10);
  EXPECT_EQ(read_flat(a), transposed);
  EXPECT_EQ(read_dims(a), transposed);
}

TEST(ShapeTracker, ReshapeOfAContiguousTrackerNeverStacksAView) {
  const ShapeTracker st =
      ShapeTracker::from_shape({2, 3, 4}).reshape({6, 4}).reshape({24}).reshape({4, 3, 2}).reshape(
          {1, 24, 1});
  EXPECT_EQ(st, ShapeTracker::from_shape({1, 24, 1}));
  EXPECT_TRUE(ShapeTracker::from_shape({1}).reshape({}).contiguous());
  EXPECT_EQ(ShapeTracker::from_shape({2, 0, 3}).reshape({0, 5}), ShapeTracker::from_shape({0, 5}));
}

TEST(ShapeTracker, ReshapeAfterPermuteStacksAViewOnlyWhenStridesDoNotChain) {
  const ShapeTracker t = ShapeTracker::from_shape({4, 6}).permute({1, 0});
  // Splitting a transposed dimension still chains: one view.
  EXPECT_EQ(t.reshape({3, 2, 4}).views().size(), 1u);
  EXPECT_EQ(t.reshape({3, 2, 4}).views()[0].strides, (std::vector<int64_t>{2, 1, 6}));
  // Joining the two transposed dimensions does not: a second, contiguous view over the first.
  const ShapeTracker flat = t.reshape({24});
  ASSERT_EQ(flat.views().size(), 2u);
  EXPECT_EQ(flat.views()[0], t.views()[0]);
  EXPECT_EQ(flat.views()[1], View::create({24}));
  // Later reshapes of the stacked contiguous view merge into it.
  EXPECT_EQ(flat.reshape({2, 12}).views().size(), 2u);
  EXPECT_EQ(flat.reshape({2, 12}).views()[1], View::create({2, 12}));
}

TEST(ShapeTracker, PadThenReshapeKeepsMasksRight) {
  // Whole padding rows stay one run when read flat: one view, one mask.
  const ShapeTracker rows = ShapeTracker::from_shape({2, 3}).pad({{1, 1}, {0, 0}}).reshape({12});
  ASSERT_EQ(rows.views().size(), 1u);
  EXPECT_EQ(rows.views()[0].mask, (Mask{{3, 9}}));
  EXPECT_EQ(read_flat(rows), (std::vector<int64_t>{-1, -1, -1, 0, 1, 2, 3, 4, 5, -1, -1, -1}));
  // Padding columns read flat need a second view; validity still follows the columns.
  const ShapeTracker cols = ShapeTracker::from_shape({2, 3}).pad({{0, 0}, {1, 0}}).reshape({8});
  ASSERT_EQ(cols.views().size(), 2u);
  EXPECT_EQ(read_flat(cols), (std::vector<int64_t>{-1, 0, 1, 2, -1, 3, 4, 5}));
  EXPECT_EQ(read_dims(cols), read_flat(cols));
  // Padding then splitting rows along the padding: (2, 2, 3) with the data in the second half.
  const ShapeTracker split =
      ShapeTracker::from_shape({2, 3}).pad({{2, 0}, {0, 0}}).reshape({2, 2, 3});
  ASSERT_EQ(split.views().size(), 1u);
  EXPECT_EQ(split.views()[0].mask, (Mask{{1, 2}, {0, 2}, {0, 3}}));
  EXPECT_EQ(read_flat(split), (std::vector<int64_t>{-1, -1, -1, -1, -1, -1, 0, 1, 2, 3, 4, 5}));
}

TEST(ShapeTracker, ExpandThenReshapeStaysOneView) {
  const ShapeTracker st = ShapeTracker::from_shape({1, 4}).expand({3, 4}).reshape({3, 2, 2});
  ASSERT_EQ(st.views().size(), 1u);
  EXPECT_EQ(st.views()[0].strides, (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(st.real_strides(), (Strides{0, 2, 1}));
}

TEST(ShapeTracker, MovementOpsChangeOnlyTheLastView) {
  const ShapeTracker two =
      ShapeTracker::from_shape({4, 6}).permute({1, 0}).reshape({24}).reshape({2, 12});
  ASSERT_EQ(two.views().size(), 2u);
  for (const ShapeTracker& st :
       {two.permute({1, 0}), two.expand({2, 12}), two.pad({{1, 0}, {0, 3}}),
        two.shrink({{0, 1}, {2, 5}}), two.flip({true, false}), two.flip_axes({1}),
        two.stride({1, -2})}) {
    ASSERT_EQ(st.views().size(), 2u);
    EXPECT_EQ(st.views()[0], two.views()[0]);
  }
  EXPECT_EQ(two.flip_axes({1}), two.flip({false, true}));
}

TEST(ShapeTracker, SimplifyMergesViewsThatOneViewExpresses) {
  const ShapeTracker t = ShapeTracker::from_shape({4, 6}).permute({1, 0});
  // Flat and back: the stacked view adds nothing.
  const ShapeTracker back = t.reshape({24}).reshape({6, 4});
  ASSERT_EQ(back.views().size(), 2u);
  EXPECT_EQ(back.simplify(), t);
  // A padded view over it: pad the transpose instead.
  const ShapeTracker padded = back.pad({{1, 1}, {0, 0}});
  EXPECT_EQ(padded.simplify(), t.pad({{1, 1}, {0, 0}}));
  // A row-major slice of the flat transpose that stays inside whole rows: shrink the transpose.
  const ShapeTracker rows = t.reshape({24}).shrink({{8, 16}}).reshape({2, 4});
  EXPECT_EQ(rows.simplify(), t.shrink({{2, 4}, {0, 4}}));
  EXPECT_EQ(read_flat(rows.simplify()), read_flat(rows));
  // A slice that cuts rows cannot be one view.
  const ShapeTracker cut = t.reshape({24}).shrink({{2, 10}});
  EXPECT_EQ(cut.simplify().views().size(), 2u);
}

TEST(ShapeTracker, AddStacksATrackerOnTopAndMerges) {
  const ShapeTracker base = ShapeTracker::from_shape({4, 6}).permute({1, 0});
  const ShapeTracker top = ShapeTracker::from_shape({6, 4}).shrink({{1, 3}, {0, 4}});
  EXPECT_EQ(base + top, base.shrink({{1, 3}, {0, 4}}));
  const ShapeTracker flat = ShapeTracker::from_shape({24});
  EXPECT_EQ((base + flat).views().size(), 2u);
  EXPECT_EQ(ShapeTracker::from_shape({6, 4}) + base.reshape({24}), base.reshape({24}).simplify());
}

TEST(ShapeTracker, ExprNodeAndExprIdxsAgreeAcrossViews) {
  // The transpose of a 3x4 read flat, padded by 2 in front and 1 behind.
  const ShapeTracker st =
      ShapeTracker::from_shape({3, 4}).permute({1, 0}).reshape({12}).pad({{2, 1}});
  std::vector<int64_t> want;
  for (int64_t k = 0; k < 15; ++k) {
    const int64_t j = k - 2;  // position in the transpose, row-major
    want.push_back(j < 0 || j >= 12 ? -1 : (j % 3) * 4 + j / 3);
  }
  EXPECT_EQ(read_flat(st), want);
  EXPECT_EQ(read_dims(st), want);
  // Unsimplified expressions mean the same.
  const IndexExpr raw = st.expr_node(UOp::var("idx0", 0, 14), false);
  for (int64_t k = 0; k < 15; ++k) {
    const std::map<std::string, int64_t> at{{"idx0", k}};
    EXPECT_EQ(eval_int(raw.valid, at) ? eval_int(raw.index, at) : -1, want[size_t(k)]);
  }
}

TEST(ShapeTracker, ValidityIsFalseWherePaddingIsAndIndexIsZeroWhenNothingIsRead) {
  const ShapeTracker st = ShapeTracker::from_shape({2, 2}).pad({{1, 0}, {0, 1}});
  EXPECT_EQ(read_dims(st), (std::vector<int64_t>{-1, -1, -1, 0, 1, -1, 2, 3, -1}));
  const ShapeTracker none = ShapeTracker::from_shape({3}).pad({{2, 0}}).shrink({{0, 2}});
  const IndexExpr e = none.expr_idxs();
  EXPECT_EQ(e.valid, UOp::const_(dtypes::bool_, false));
  EXPECT_EQ(e.index, UOp::const_(dtypes::int32, 0));
}

TEST(ShapeTracker, RealStridesAreOneNumberPerDimWhereThereIsOne) {
  EXPECT_EQ(ShapeTracker::from_shape({10, 10}).real_strides(), (Strides{10, 1}));
  EXPECT_EQ(ShapeTracker::from_shape({10, 10}).permute({1, 0}).real_strides(), (Strides{1, 10}));
  EXPECT_EQ(ShapeTracker::from_shape({1, 4}).expand({3, 4}).real_strides(), (Strides{0, 1}));
  // A padded dimension has no stride while validity depends on it, unless asked to ignore that.
  const ShapeTracker padded = ShapeTracker::from_shape({4, 6}).pad({{1, 0}, {0, 0}});
  EXPECT_EQ(padded.real_strides(), (Strides{std::nullopt, 1}));
  EXPECT_EQ(padded.real_strides(true), (Strides{6, 1}));
  EXPECT_EQ(padded.unit_stride_axes(), (std::vector<int64_t>{1}));
  // Across views: a transpose read flat has no stride; read back as (6, 4) it does.
  EXPECT_EQ(ShapeTracker::from_shape({10, 10}).permute({1, 0}).reshape({100}).real_strides(),
            (Strides{std::nullopt}));
  const ShapeTracker back =
      ShapeTracker::from_shape({4, 6}).permute({1, 0}).reshape({24}).reshape({6, 4});
  ASSERT_EQ(back.views().size(), 2u);
  EXPECT_EQ(back.real_strides(), (Strides{1, 6}));
  EXPECT_EQ(back.flip({false, true}).real_strides(), (Strides{1, -6}));
  EXPECT_EQ(back.pad({{0, 0}, {1, 0}}).real_strides(), (Strides{1, std::nullopt}));
  EXPECT_EQ(back.pad({{0, 0}, {1, 0}}).real_strides(true), (Strides{1, 6}));
}

TEST(ShapeTracker, EqualTrackersHashEqualAndInternAsOneUOpArgument) {
  const ShapeTracker a = ShapeTracker::from_shape({4, 6}).permute({1, 0}).reshape({24});
  const ShapeTracker b = ShapeTracker::from_shape({4, 6}).permute({1, 0}).reshape({24});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ((std::unordered_set<ShapeTracker>{a, b, a.reshape({2, 12})}.size()), 2u);

  const UOpPtr va = UOp::make(Ops::VIEW, dtypes::void_, {}, a.to_arg());
  EXPECT_EQ(va, UOp::make(Ops::VIEW, dtypes::void_, {}, b.to_arg()));
  EXPECT_NE(va, UOp::make(Ops::VIEW, dtypes::void_, {}, a.reshape({2, 12}).to_arg()));
  ASSERT_NE(ShapeTracker::from_arg(va->arg), nullptr);
  EXPECT_EQ(*ShapeTracker::from_arg(va->arg), a);
  EXPECT_EQ(arg_repr(va->arg), to_string(a));
  EXPECT_EQ(ShapeTracker::from_arg(Arg(int64_t(3))), nullptr);
}

TEST(ShapeTracker, InvalidMovementThrowsNamingOpShapeAndArgument) {
  const ShapeTracker st = ShapeTracker::from_shape({4, 6}).permute({1, 0}).reshape({24});
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message([&] {
              st.reshape({5, 5});
            }),
            "reshape to (5, 5) of shape (24,): element counts differ (24 vs 25)");
  EXPECT_EQ(message([&] {
              st.permute({1, 0});
            }),
            "permute (1, 0) of shape (24,): needs one entry per dimension (1), got 2");
  EXPECT_EQ(message([&] { st.expand({48}); }),
            "expand to (48,) of shape (24,): dimension 0 has size 24, only size 1 expands");
  EXPECT_EQ(message([&] {
              st.pad({{-1, 0}});
            }),
            "pad ((-1, 0),) of shape (24,): padding cannot be negative");
  EXPECT_EQ(message([&] {
              st.shrink({{3, 25}});
            }),
            "shrink ((3, 25),) of shape (24,): dimension 0 needs 0 <= begin <= end <= 24");
  EXPECT_EQ(message([&] { st.stride({0}); }), "stride (0,) of shape (24,): a stride cannot be 0");
}

// A convolution's input gradient reads a tiled, padded view: dimension p = a*16 + y of a view
// padded to [0, 51) is read only below 51, and within that bound (2601*n + 51*p + q) // 867
// folds to (51*n + p) // 17. The index agrees with the unsimplified composition wherever the
// element exists, and the mod of the quotient by 51 is gone.
TEST(ShapeTracker, PaddedViewsFoldTheirIndexWithinTheirMasks) {
  const int64_t nc = 2, k = 3, o = 14, i = 16, row = 17, r = 4;
  ShapeTracker st = ShapeTracker::from_shape({nc, k, o, k, o});
  st = st.pad({{0, 0}, {0, 0}, {0, row - o}, {0, 0}, {0, row - o}}).reshape({nc, k * row, k * row});
  st = st.pad({{0, 0}, {0, r * i - k * row}, {0, r * i - k * row}}).reshape({nc, r, i, r, i});
  std::vector<UOpPtr> idxs;
  for (size_t d = 0; d < st.shape().size(); ++d)
    idxs.push_back(UOp::var("idx" + std::to_string(d), 0, st.shape()[d] - 1));
  const IndexExpr raw = st.expr_idxs(idxs, false), e = st.expr_idxs(idxs);
  for (int64_t a = 0; a < nc; ++a)
    for (int64_t b = 0; b < r; ++b)
      for (int64_t y = 0; y < i; ++y)
        for (int64_t c = 0; c < r; ++c)
          for (int64_t x = 0; x < i; ++x) {
            const std::map<std::string, int64_t> at{{"idx0", a}, {"idx1", b}, {"idx2", y}, {"idx3", c}, {"idx4", x}};
            const bool valid = eval_int(raw.valid, at) != 0;
            ASSERT_EQ(eval_int(e.valid, at) != 0, valid) << a << b << y << c << x;
            if (valid) {
              ASSERT_EQ(eval_int(e.index, at), eval_int(raw.index, at)) << a << b << y << c << x;
            }
          }
  const std::string index = render(e.index);
  EXPECT_EQ(index.find("//867"), std::string::npos) << index;
  EXPECT_EQ(index.find("%51"), std::string::npos) << index;
}
