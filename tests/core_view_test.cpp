// View: the canonical form, each movement op's strides, offset and mask, reshape's merging of
// dimensions, the printer, and the errors for invalid arguments.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <unordered_set>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/view.hpp>

using namespace vkg;

namespace {

View make(Shape shape, std::vector<int64_t> strides, int64_t offset, std::optional<Mask> mask) {
  return View::create(std::move(shape), std::move(strides), offset, std::move(mask));
}

using vkg::test::error_of;

}  // namespace

TEST(View, CreateGivesRowMajorStridesWithZeroForSizeOneDims) {
  const View v = View::create({10, 10});
  EXPECT_EQ(v.strides, (std::vector<int64_t>{10, 1}));
  EXPECT_TRUE(v.contiguous);
  EXPECT_EQ(View::create({3, 1, 4}).strides, (std::vector<int64_t>{4, 0, 1}));
  EXPECT_EQ(View::create({}).strides, std::vector<int64_t>{});
  EXPECT_TRUE(View::create({}).contiguous);
  EXPECT_EQ(View::create({2, 3, 4}).size(), 24);
  // Explicit strides are canonicalized too: a size-1 dimension's stride never matters.
  EXPECT_EQ(make({3, 1}, {1, 7}, 0, std::nullopt).strides, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(make({3, 1}, {1, 7}, 0, std::nullopt).contiguous);
}

TEST(View, CreateCanonicalizesMasks) {
  // A mask that hides nothing is no mask.
  EXPECT_EQ(make({2, 3}, {3, 1}, 0, Mask{{0, 2}, {0, 3}}), View::create({2, 3}));
  // A dimension masked to one index has stride 0; its index moves into the offset.
  const View pinned = make({4, 3}, {3, 1}, 0, Mask{{2, 3}, {0, 3}});
  EXPECT_EQ(pinned.strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(pinned.offset, 6);
  // A mask that hides everything becomes all (0, 0), with nothing else left to distinguish views.
  const View none = make({4, 3}, {3, 1}, 5, Mask{{1, 3}, {2, 2}});
  EXPECT_EQ(none, make({4, 3}, {0, 0}, 0, Mask{{0, 0}, {0, 0}}));
  EXPECT_TRUE(none.all_masked());
  // A shape with a 0 has no elements: contiguous, zero strides.
  EXPECT_EQ(make({2, 0, 3}, {1, 2, 3}, 4, Mask{{0, 1}, {0, 0}, {0, 3}}),
            (View{{2, 0, 3}, {0, 0, 0}, 0, std::nullopt, true, std::nullopt}));
  EXPECT_FALSE(make({2}, {1}, 1, std::nullopt).contiguous);
}

TEST(View, PrintsAsTinygradDoes) {
  EXPECT_EQ(to_string(View::create({10, 10})),
            "View(shape=(10, 10), strides=(10, 1), offset=0, mask=None, contiguous=True)");
  EXPECT_EQ(to_string(View::create({10, 10}).permute({1, 0}).pad({{1, 1}, {0, 0}})),
            "View(shape=(12, 10), strides=(1, 10), offset=-1, mask=((1, 11), (0, 10)), "
            "contiguous=False)");
  EXPECT_EQ(to_string(View::create({5}).pad({{0, 2}})),
            "View(shape=(7,), strides=(1,), offset=0, mask=((0, 5),), contiguous=False)");
  EXPECT_EQ(to_string(View::create({})),
            "View(shape=(), strides=(), offset=0, mask=None, contiguous=True)");
}

TEST(View, EqualViewsHashEqual) {
  const View a = View::create({4, 6}).permute({1, 0}), b = View::create({4, 6}).permute({1, 0});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  std::unordered_set<View> set{a, b, View::create({6, 4}),
                               View::create({6, 4}).pad({{0, 1}, {0, 0}})};
  EXPECT_EQ(set.size(), 3u);
}

TEST(View, PermuteReordersStridesAndMask) {
  const View v = View::create({2, 3, 4}).pad({{0, 0}, {1, 0}, {0, 0}}).permute({2, 0, 1});
  EXPECT_EQ(v.shape, (Shape{4, 2, 4}));
  EXPECT_EQ(v.strides, (std::vector<int64_t>{1, 12, 4}));
  EXPECT_EQ(v.mask, (Mask{{0, 4}, {0, 2}, {1, 4}}));
  EXPECT_EQ(v.offset, -4);
}

TEST(View, ExpandBroadcastsSizeOneDimsWithStrideZero) {
  const View v = View::create({1, 3}).expand({4, 3});
  EXPECT_EQ(v.strides, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(v.contiguous);
  // A size-1 dimension that exists stays present everywhere; one that is padding stays padding.
  const View padded = View::create({1, 3}).pad({{0, 0}, {1, 0}});
  EXPECT_EQ(padded.expand({5, 4}).mask, (Mask{{0, 5}, {1, 4}}));
  const View hidden = View::create({1, 3}).pad({{1, 0}, {0, 0}}).shrink({{0, 1}, {0, 3}});
  EXPECT_TRUE(hidden.expand({5, 3}).all_masked());
}

TEST(View, PadMovesTheOffsetBackAndMasksTheNewElements) {
  const View v = View::create({2, 3}).pad({{1, 1}, {0, 2}});
  EXPECT_EQ(v.shape, (Shape{4, 5}));
  EXPECT_EQ(v.strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(v.offset, -3);
  EXPECT_EQ(v.mask, (Mask{{1, 3}, {0, 3}}));
  EXPECT_EQ(View::create({2, 3}).pad({{0, 0}, {0, 0}}), View::create({2, 3}));
}

TEST(View, ShrinkMovesTheOffsetAndCutsTheMask) {
  const View v = View::create({4, 5}).shrink({{1, 3}, {2, 5}});
  EXPECT_EQ(v, make({2, 3}, {5, 1}, 7, std::nullopt));
  // Shrinking a padded view back to its data drops the mask.
  EXPECT_EQ(View::create({2, 3}).pad({{1, 1}, {0, 2}}).shrink({{1, 3}, {0, 3}}),
            View::create({2, 3}));
  // Part data, part padding.
  EXPECT_EQ(View::create({2, 3}).pad({{1, 1}, {0, 2}}).shrink({{0, 2}, {2, 5}}).mask,
            (Mask{{1, 2}, {0, 1}}));
}

TEST(View, FlipNegatesStridesAndMirrorsTheMask) {
  const View v = View::create({2, 3}).flip({true, false});
  EXPECT_EQ(v.strides, (std::vector<int64_t>{-3, 1}));
  EXPECT_EQ(v.offset, 3);
  const View m = View::create({4}).pad({{1, 0}}).flip({true});
  EXPECT_EQ(m.mask, (Mask{{0, 4}}));
  EXPECT_EQ(m.offset, 3);
  EXPECT_EQ(m.strides, (std::vector<int64_t>{-1}));
  EXPECT_EQ(View::create({2, 3}).flip_axes({1}), View::create({2, 3}).flip({false, true}));
  EXPECT_EQ(View::create({2, 3}).flip({true, true}).flip({true, true}), View::create({2, 3}));
}

TEST(View, StrideTakesEveryKthElement) {
  EXPECT_EQ(View::create({10}).stride({3}), make({4}, {3}, 0, std::nullopt));   // 0, 3, 6, 9
  EXPECT_EQ(View::create({5}).stride({-2}), make({3}, {-2}, 4, std::nullopt));  // 4, 2, 0
  EXPECT_EQ(View::create({2, 6}).stride({1, 2}), make({2, 3}, {6, 2}, 0, std::nullopt));
  // Positions 0..7 of a 6-element view padded by 1 on each side; every 3rd keeps 0, 3, 6: the
  // first is padding, the others data.
  EXPECT_EQ(View::create({6}).pad({{1, 1}}).stride({3}).mask, (Mask{{1, 3}}));
  EXPECT_EQ(View::create({6}).pad({{1, 1}}).stride({-3}).mask, (Mask{{1, 3}}));  // 7 (pad), 4, 1
}

TEST(View, MergeDimsJoinsDimsWhoseStridesChain) {
  using M = std::vector<MergedDim>;
  EXPECT_EQ(merge_dims({2, 3, 4}, {12, 4, 1}), (M{{24, 1, 24}}));
  EXPECT_EQ(merge_dims({10, 10}, {1, 10}), (M{{10, 1, 10}, {10, 10, 10}}));
  EXPECT_EQ(merge_dims({5, 2, 5, 2}, {2, 1, 20, 10}), (M{{10, 1, 10}, {10, 10, 10}}));
  EXPECT_EQ(merge_dims({2, 3}, {0, 1}), (M{{2, 0, 0}, {3, 1, 3}}));  // broadcast, then data
  EXPECT_EQ(merge_dims({2, 3}, {0, 0}), (M{{6, 0, 0}}));             // broadcast runs join
  EXPECT_EQ(merge_dims({3, 1, 4}, {4, 0, 1}), (M{{12, 1, 12}}));     // size 1 is skipped
  // A dimension masked to one index joins the next whatever its stride: only 3 of the 12
  // positions are real.
  EXPECT_EQ(merge_dims({4, 3}, {0, 1}, Mask{{2, 3}, {0, 3}}), (M{{12, 1, 3}}));
  EXPECT_EQ(merge_dims({}, {}), M{});
}

TEST(View, MinifyMergesAsFarAsStridesAllow) {
  const View v = make({5, 2, 5, 2}, {2, 1, 20, 10}, 0, std::nullopt);
  EXPECT_EQ(v.minify(), make({10, 10}, {1, 10}, 0, std::nullopt));
  EXPECT_EQ(View::create({2, 3, 4}).minify(), View::create({24}));
}

TEST(View, ReshapeOfAContiguousViewIsContiguous) {
  EXPECT_EQ(View::create({4, 6}).reshape({2, 12}), View::create({2, 12}));
  EXPECT_EQ(View::create({4, 6}).reshape({24}), View::create({24}));
  EXPECT_EQ(View::create({4, 6}).reshape({1, 4, 1, 6}), View::create({1, 4, 1, 6}));
  EXPECT_EQ(View::create({1}).reshape({}), View::create({}));
}

TEST(View, ReshapeSplitsAndJoinsChainedDims) {
  const View t = View::create({10, 10}).permute({1, 0});
  EXPECT_EQ(t.reshape({5, 2, 5, 2}), make({5, 2, 5, 2}, {2, 1, 20, 10}, 0, std::nullopt));
  EXPECT_EQ(t.reshape({10, 1, 10}), make({10, 1, 10}, {1, 0, 10}, 0, std::nullopt));
  EXPECT_EQ(t.reshape({100}), std::nullopt);    // the transpose read flat is not one stride
  EXPECT_EQ(t.reshape({20, 5}), std::nullopt);  // a new dim straddles two old ones
  // Broadcast dims split and join like any other.
  const View b = View::create({1, 4}).expand({3, 4});
  EXPECT_EQ(b.reshape({3, 2, 2}), make({3, 2, 2}, {0, 2, 1}, 0, std::nullopt));
  EXPECT_EQ(b.reshape({12}), std::nullopt);
  EXPECT_EQ(View::create({1}).expand({6}).reshape({2, 3}), make({2, 3}, {0, 0}, 0, std::nullopt));
}

TEST(View, ReshapeCarriesMasksWhenTheyStayBoxes) {
  // Two padding rows above a 2x3 block, split into (2, 2, 3): the data is the second half.
  const View top = View::create({2, 3}).pad({{2, 0}, {0, 0}});
  EXPECT_EQ(top.reshape({2, 2, 3}), make({2, 2, 3}, {0, 3, 1}, 0, Mask{{1, 2}, {0, 2}, {0, 3}}));
  // Padding rows read flat: one contiguous valid run.
  const View rows = View::create({2, 3}).pad({{1, 1}, {0, 0}});
  EXPECT_EQ(rows.reshape({12}), make({12}, {1}, -3, Mask{{3, 9}}));
  // Padding columns read flat are not one run.
  EXPECT_EQ(View::create({2, 3}).pad({{0, 0}, {1, 0}}).reshape({8}), std::nullopt);
  // A row masked to one index merges with the columns after it: rows 1 of (2, 6) are (2, 0..2).
  const View pinned = View::create({1, 3}).pad({{2, 1}, {0, 0}});
  EXPECT_EQ(pinned.reshape({2, 6}), make({2, 6}, {0, 1}, 0, Mask{{1, 2}, {0, 3}}));
  // Everything masked reshapes to everything masked, except to a 0-d view, which has no mask.
  const View none = View::create({2, 3}).pad({{0, 0}, {2, 0}}).shrink({{0, 2}, {0, 2}});
  EXPECT_TRUE(none.all_masked());
  EXPECT_TRUE(none.reshape({4, 1})->all_masked());
  EXPECT_EQ(View::create({1}).pad({{1, 0}}).shrink({{0, 1}}).reshape({}), std::nullopt);
}

TEST(View, ExprIsOffsetPlusStridedIndexesAndMaskChecks) {
  const View v =
      View::create({2, 3}).pad({{1, 1}, {0, 2}});  // (4, 5), data at rows 1..2, cols 0..2
  const UOpPtr i = UOp::var("i", 0, 3), j = UOp::var("j", 0, 4);
  const IndexExpr e = v.expr({i, j}, UOp::const_(dtypes::bool_, true));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 5; ++b) {
      const std::map<std::string, int64_t> at{{"i", a}, {"j", b}};
      const bool inside = a >= 1 && a < 3 && b < 3;
      EXPECT_EQ(eval_int(e.valid, at) != 0, inside) << a << "," << b;
      if (inside) {
        EXPECT_EQ(eval_int(e.index, at), (a - 1) * 3 + b);
      }
    }
  // Bounds that already satisfy the mask add no condition.
  const IndexExpr inner =
      v.expr({UOp::var("r", 1, 2), UOp::var("c", 0, 2)}, UOp::const_(dtypes::bool_, true));
  EXPECT_EQ(inner.valid, UOp::const_(dtypes::bool_, true));
}

TEST(View, InvalidMovementArgumentsThrowNamingOpShapeAndArgument) {
  const View v = View::create({2, 3});
  auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
      if (msg.find(p) == std::string::npos)
        return testing::AssertionFailure() << "'" << p << "' not in: " << msg;
    return testing::AssertionSuccess();
  };
  EXPECT_TRUE(has(error_of([&] {
                    (void)v.reshape({4, 2});
                  }),
                  {"reshape", "(2, 3)", "(4, 2)", "6 vs 8"}));
  EXPECT_TRUE(has(error_of([&] {
                    (void)v.reshape({-2, -3});
                  }),
                  {"reshape", "(2, 3)", "(-2, -3)", "negative"}));
  EXPECT_TRUE(has(error_of([&] { v.permute({0}); }), {"permute", "(2, 3)", "(0,)"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.permute({1, 1});
                  }),
                  {"permute", "(2, 3)", "(1, 1)", "not a permutation"}));
  EXPECT_TRUE(has(error_of([&] { v.permute({0, 2}); }), {"permute", "(0, 2)"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.expand({4, 3});
                  }),
                  {"expand", "(2, 3)", "(4, 3)", "dimension 0"}));
  EXPECT_TRUE(has(error_of([&] { v.expand({2, 3, 1}); }), {"expand", "(2, 3)", "(2, 3, 1)"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.pad({{0, 0}, {-1, 0}});
                  }),
                  {"pad", "(2, 3)", "((0, 0), (-1, 0))", "negative"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.shrink({{0, 2}, {1, 4}});
                  }),
                  {"shrink", "(2, 3)", "((0, 2), (1, 4))", "dimension 1"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.shrink({{2, 1}, {0, 3}});
                  }),
                  {"shrink", "(2, 3)", "((2, 1), (0, 3))", "begin <= end"}));
  EXPECT_TRUE(has(error_of([&] { v.shrink({{-1, 1}, {0, 3}}); }), {"shrink", "(2, 3)"}));
  EXPECT_TRUE(has(error_of([&] {
                    v.stride({1, 0});
                  }),
                  {"stride", "(2, 3)", "(1, 0)", "cannot be 0"}));
  EXPECT_TRUE(has(error_of([&] { v.flip_axes({1, 1}); }), {"flip", "(2, 3)", "(1, 1)"}));
  EXPECT_TRUE(has(error_of([&] { v.flip({true}); }), {"flip", "(2, 3)"}));
  EXPECT_TRUE(has(error_of([] { View::create({2, -1}); }), {"negative", "(2, -1)"}));
}
