#include "core/dtype.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "core/tensor.h"

namespace collie {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("float"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("long"), DType::kInt64);
  EXPECT_FALSE(parse_dtype("float8"));
}

TEST(Half, KnownValues) {
  EXPECT_EQ(Half::from_float(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half::from_float(-2.0f).bits, 0xc000);
  EXPECT_EQ(Half::from_float(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half::from_float(65520.0f).bits, 0x7c00);  // rounds up to inf
  EXPECT_EQ(Half::from_float(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Half::from_float(1.0f + 1.0f / 2048).bits, 0x3c00);  // tie to even
  EXPECT_EQ(Half::from_float(1.0f + 3.0f / 2048).bits, 0x3c02);  // tie to even (up)
  EXPECT_TRUE(std::isnan(Half::from_float(NAN).to_float()));
  EXPECT_EQ(Half{0x3555}.to_float(), 0.333251953125f);
}

TEST(BFloat16, KnownValues) {
  EXPECT_EQ(BFloat16::from_float(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16::from_float(3.0f).to_float(), 3.0f);
  EXPECT_TRUE(std::isnan(BFloat16::from_float(NAN).to_float()));
}

RC_GTEST_PROP(Half, EveryHalfRoundTripsThroughFloat, (std::uint16_t bits)) {
  const Half h{bits};
  const float f = h.to_float();
  if (std::isnan(f)) {
    RC_ASSERT(std::isnan(Half::from_float(f).to_float()));
  } else {
    RC_ASSERT(Half::from_float(f).bits == bits);
  }
}

RC_GTEST_PROP(BFloat16, EveryBFloat16RoundTripsThroughFloat, (std::uint16_t bits)) {
  const BFloat16 b{bits};
  const float f = b.to_float();
  if (!std::isnan(f)) RC_ASSERT(BFloat16::from_float(f).bits == bits);
}

TEST(Tensor, FormatsLikeTorch) {
  Tensor f(DType::kFloat32, {2});
  f.set(0, 0);
  f.set(1, 1);
  EXPECT_EQ(format_tensor(f), "tensor([0., 1.])");
  EXPECT_EQ(format_scalar(DType::kFloat32, 4), "4.0");
  Tensor i(DType::kInt64, {2});
  i.set_int(0, 1);
  i.set_int(1, 2);
  EXPECT_EQ(format_tensor(i), "tensor([1, 2])");
  EXPECT_EQ(format_scalar(DType::kBool, 1), "True");
}

}  // namespace
}  // namespace collie
