#include "check/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace collie::check {
namespace {

Tensor of(DType dt, const std::vector<double>& v) { return Tensor::of(dt, v); }

TEST(Compare, EqualBitsAreEqual) {
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {1, 2, 3}), of(DType::kFloat32, {1, 2, 3})), "");
}

TEST(Compare, NamesTheFirstDifferingElement) {
  EXPECT_EQ(compare_tensors(of(DType::kInt32, {1, 2, 3}), of(DType::kInt32, {1, 5, 4})), "element 1 is 2, expected 5");
  CompareRule r;
  r.want_is = "the oracle says";
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {0.5}), of(DType::kFloat32, {4})), "element 0 is 0.5, expected 4.0");
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {0.5}), of(DType::kFloat32, {4}), r), "element 0 is 0.5, the oracle says 4.0");
}

TEST(Compare, ShapeAndDTypeDifferencesAreNamed) {
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {1, 2}), of(DType::kFloat32, {1})), "has 2 elements, expected 1");
  EXPECT_EQ(compare_tensors(of(DType::kFloat64, {1}), of(DType::kFloat32, {1})), "is float64, expected float32");
}

TEST(Compare, FloatingSumsMayRoundDifferentlyMaxMayNot) {
  const double a = 1.0 + 1e-7;  // one float32 ulp-ish away
  CompareRule sum{.reduced = true, .op = ReduceOp::kSum, .contributors = 4};
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {a}), of(DType::kFloat32, {1}), sum), "");
  CompareRule max{.reduced = true, .op = ReduceOp::kMax, .contributors = 4};
  EXPECT_NE(compare_tensors(of(DType::kFloat32, {a}), of(DType::kFloat32, {1}), max), "");
  // Far outside the rounding of 4 operands.
  EXPECT_NE(compare_tensors(of(DType::kFloat32, {1.01}), of(DType::kFloat32, {1}), sum), "");
  // Integers never round.
  EXPECT_NE(compare_tensors(of(DType::kInt64, {3}), of(DType::kInt64, {4}), sum), "");
}

TEST(Compare, ASumsAllowanceScalesWithItsOperandsUnderCancellation) {
  // Four float16 operands near 16 summing to about 0.24 (Gloo's order vs
  // the oracle's): an error of 2^-9 is within what the operands' rounding
  // allows, though large beside the result.
  const Tensor got = of(DType::kFloat16, {-0.2421875}), want = of(DType::kFloat16, {-0.244140625});
  CompareRule by_result{.reduced = true, .op = ReduceOp::kSum, .contributors = 4};
  EXPECT_NE(compare_tensors(got, want, by_result), "");
  const Tensor magnitudes = of(DType::kFloat64, {31.5});
  CompareRule by_operands = by_result;
  by_operands.magnitudes = &magnitudes;
  EXPECT_EQ(compare_tensors(got, want, by_operands), "");
  // Products do not cancel: their allowance stays with the result.
  CompareRule product = by_operands;
  product.op = ReduceOp::kProduct;
  EXPECT_NE(compare_tensors(got, want, product), "");
}

TEST(Compare, NaNsAndSignedZerosAreEqualUnlessBitwise) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {nan}), of(DType::kFloat32, {-nan})), "");
  EXPECT_EQ(compare_tensors(of(DType::kFloat64, {-0.0}), of(DType::kFloat64, {0.0})), "");
  CompareRule bits{.bitwise = true};
  EXPECT_EQ(compare_tensors(of(DType::kFloat64, {-0.0}), of(DType::kFloat64, {0.0}), bits),
            "element 0 is -0.0, expected 0.0");
  EXPECT_EQ(compare_tensors(of(DType::kFloat32, {-nan}), of(DType::kFloat32, {nan}), bits),
            "element 0 is nan (0xffc00000), expected nan (0x7fc00000)");
}

}  // namespace
}  // namespace collie::check
