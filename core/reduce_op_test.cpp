#include "core/reduce_op.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace collie {
namespace {

TEST(ReduceOp, BitwiseOpsOnFloatsAreRejectedWithAReason) {
  auto why = reduce_op_unsupported(ReduceOp::kBand, DType::kFloat32);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("BAND is not defined for float32"), std::string::npos) << *why;
  EXPECT_TRUE(reduce_op_unsupported(ReduceOp::kBxor, DType::kBFloat16));
  EXPECT_FALSE(reduce_op_unsupported(ReduceOp::kBor, DType::kInt8));
  EXPECT_FALSE(reduce_op_unsupported(ReduceOp::kBand, DType::kBool));
}

TEST(ReduceOp, AverageOnIntegersAndBoolIsRejected) {
  EXPECT_TRUE(reduce_op_unsupported(ReduceOp::kAvg, DType::kInt64));
  EXPECT_TRUE(reduce_op_unsupported(ReduceOp::kAvg, DType::kBool));
  EXPECT_FALSE(reduce_op_unsupported(ReduceOp::kAvg, DType::kFloat16));
}

TEST(ReduceOp, BoolSumAndMaxAreOrProductAndMinAreAnd) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kMin}) {
    std::uint8_t d[4] = {0, 0, 1, 1};
    const std::uint8_t s[4] = {0, 1, 0, 1};
    reduce_host(d, s, 4, DType::kBool, op);
    const bool is_or = op == ReduceOp::kSum || op == ReduceOp::kMax;
    EXPECT_EQ(d[0], 0);
    EXPECT_EQ(d[1], is_or ? 1 : 0);
    EXPECT_EQ(d[2], is_or ? 1 : 0);
    EXPECT_EQ(d[3], 1);
  }
}

TEST(ReduceOp, IntegerArithmeticWraps) {
  std::int8_t d = 127;
  const std::int8_t s = 1;
  reduce_host(&d, &s, 1, DType::kInt8, ReduceOp::kSum);
  EXPECT_EQ(d, -128);
  std::uint8_t u = 16;
  const std::uint8_t v = 16;
  reduce_host(&u, &v, 1, DType::kUInt8, ReduceOp::kProduct);
  EXPECT_EQ(u, 0);
  std::int64_t big = INT64_MAX;
  const std::int64_t two = 2;
  reduce_host(&big, &two, 1, DType::kInt64, ReduceOp::kProduct);
  EXPECT_EQ(big, -2);
}

TEST(ReduceOp, MinAndMaxPropagateNaN) {
  float d = 1.0f;
  const float s = NAN;
  reduce_host(&d, &s, 1, DType::kFloat32, ReduceOp::kMin);
  EXPECT_TRUE(std::isnan(d));
  double e = NAN;
  const double f = 3.0;
  reduce_host(&e, &f, 1, DType::kFloat64, ReduceOp::kMax);
  EXPECT_TRUE(std::isnan(e));
}

TEST(ReduceOp, HalfSumRoundsAfterEachCombination) {
  Half d = Half::from_float(2048.0f);
  const Half s = Half::from_float(1.0f);
  reduce_host(&d, &s, 1, DType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(d.to_float(), 2048.0f);  // 2049 is not a half: ties to even
}

TEST(ReduceOp, BitwiseOps) {
  std::int32_t d = 0b1100;
  const std::int32_t s = 0b1010;
  std::int32_t a = d, o = d, x = d;
  reduce_host(&a, &s, 1, DType::kInt32, ReduceOp::kBand);
  reduce_host(&o, &s, 1, DType::kInt32, ReduceOp::kBor);
  reduce_host(&x, &s, 1, DType::kInt32, ReduceOp::kBxor);
  EXPECT_EQ(a, 0b1000);
  EXPECT_EQ(o, 0b1110);
  EXPECT_EQ(x, 0b0110);
}

TEST(ReduceOp, ParseNames) {
  EXPECT_EQ(parse_reduce_op("sum"), ReduceOp::kSum);
  EXPECT_EQ(parse_reduce_op("BXOR"), ReduceOp::kBxor);
  EXPECT_FALSE(parse_reduce_op("mean"));
}

}  // namespace
}  // namespace collie
