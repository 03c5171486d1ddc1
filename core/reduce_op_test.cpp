#include "core/reduce_op.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>
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

// Regression: recursive doubling gave different bits on different ranks when
// MIN/MAX tied at -0.0 and +0.0 or NaNs of different signs met, because each
// rank passed its own operand first and the combination kept the first.
template <typename T>
std::uint64_t bits_of(T v) {
  if constexpr (sizeof(T) == 2) return std::bit_cast<std::uint16_t>(v);
  if constexpr (sizeof(T) == 4) return std::bit_cast<std::uint32_t>(v);
  if constexpr (sizeof(T) == 8) return std::bit_cast<std::uint64_t>(v);
}

template <typename T>
void expect_order_independent(DType dtype, T a, T b) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    if (reduce_op_unsupported(op, dtype)) continue;
    T ab = a, ba = b;
    reduce_host(&ab, &b, 1, dtype, op);
    reduce_host(&ba, &a, 1, dtype, op);
    EXPECT_EQ(bits_of(ab), bits_of(ba)) << dtype_name(dtype) << " " << reduce_op_name(op) << " of 0x" << std::hex
                                        << bits_of(a) << " and 0x" << bits_of(b);
  }
}

template <typename T>
void expect_canonical_nan(DType dtype, T x, std::uint64_t canonical) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    T d = x;
    const T zero{};  // +0 in every floating type
    reduce_host(&d, &zero, 1, dtype, op);
    EXPECT_EQ(bits_of(d), canonical) << dtype_name(dtype) << " " << reduce_op_name(op) << " of 0x" << std::hex
                                     << bits_of(x) << " and +0";
  }
}

TEST(ReduceOp, TiesBetweenSignedZerosAndNaNsOfEitherSignGiveTheSameBitsInEitherOrder) {
  const double nan_neg = -std::numeric_limits<double>::quiet_NaN();
  const double nan_payload = std::bit_cast<double>(0x7ff800000000beefull);
  const std::vector<double> specials = {0.0, -0.0, NAN, nan_neg, nan_payload, INFINITY, -INFINITY,
                                        std::numeric_limits<double>::denorm_min(), -5e-324, 1.5, -2.0};
  for (double a : specials)
    for (double b : specials) {
      expect_order_independent(DType::kFloat64, a, b);
      expect_order_independent(DType::kFloat32, static_cast<float>(a), static_cast<float>(b));
      expect_order_independent(DType::kFloat16, Half::from_float(static_cast<float>(a)),
                               Half::from_float(static_cast<float>(b)));
      expect_order_independent(DType::kBFloat16, BFloat16::from_float(static_cast<float>(a)),
                               BFloat16::from_float(static_cast<float>(b)));
    }
}

TEST(ReduceOp, MinPicksNegativeZeroAndMaxPositiveZero) {
  for (auto [a, b] : {std::pair{0.0f, -0.0f}, std::pair{-0.0f, 0.0f}}) {
    float mn = a, mx = a;
    reduce_host(&mn, &b, 1, DType::kFloat32, ReduceOp::kMin);
    reduce_host(&mx, &b, 1, DType::kFloat32, ReduceOp::kMax);
    EXPECT_TRUE(std::signbit(mn));
    EXPECT_FALSE(std::signbit(mx));
  }
}

TEST(ReduceOp, ANaNFromAnyCombinationIsTheCanonicalQuietNaN) {
  // Negative, with a payload, signalling: each becomes +qNaN with no payload.
  expect_canonical_nan(DType::kFloat64, std::bit_cast<double>(0xfff000000000beefull), 0x7ff8000000000000ull);
  expect_canonical_nan(DType::kFloat32, std::bit_cast<float>(0xffc0beefu), 0x7fc00000u);
  expect_canonical_nan(DType::kFloat32, std::bit_cast<float>(0x7f80beefu), 0x7fc00000u);
  expect_canonical_nan(DType::kFloat16, std::bit_cast<Half>(std::uint16_t{0xfe01}), 0x7e00u);
  expect_canonical_nan(DType::kBFloat16, std::bit_cast<BFloat16>(std::uint16_t{0xffc1}), 0x7fc0u);
  // NaNs an operation creates (inf - inf, 0 * inf) are negative on x86; canonical too.
  double d = INFINITY;
  const double e = -INFINITY;
  reduce_host(&d, &e, 1, DType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(bits_of(d), 0x7ff8000000000000ull);
  float z = 0.0f;
  const float inf = INFINITY;
  reduce_host(&z, &inf, 1, DType::kFloat32, ReduceOp::kProduct);
  EXPECT_EQ(bits_of(z), 0x7fc00000u);
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

// reduce_host works in 256-byte blocks with a tail: every count around the
// block size, at every element offset, gives what one element at a time
// gives (a count of 1 never enters the block loop).
TEST(ReduceOp, BlocksAndTailGiveTheBitsOfOneElementAtATime) {
  for (int t = 0; t < kNumDTypes; ++t) {
    const auto dtype = static_cast<DType>(t);
    const std::size_t size = dtype_size(dtype);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduce_op_unsupported(op, dtype)) continue;
      for (std::size_t count : {std::size_t{0}, 256 / size - 1, 256 / size, 256 / size + 1, 1000 / size + 3}) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
          std::vector<std::uint8_t> dst((count + offset) * size), src(dst.size());
          for (std::size_t i = 0; i < dst.size(); ++i) {
            dst[i] = static_cast<std::uint8_t>(i * 37 + 11);
            src[i] = static_cast<std::uint8_t>(i * 101 + 7);
            if (dtype == DType::kBool) {
              dst[i] &= 1;
              src[i] &= 1;
            }
          }
          auto want = dst;
          reduce_host(dst.data() + offset * size, src.data() + offset * size, count, dtype, op);
          for (std::size_t i = offset; i < offset + count; ++i)
            reduce_host(want.data() + i * size, src.data() + i * size, 1, dtype, op);
          ASSERT_EQ(dst, want) << dtype_name(dtype) << " " << reduce_op_name(op) << " count " << count << " offset "
                               << offset;
        }
      }
    }
  }
}

TEST(ReduceOp, ParseNames) {
  EXPECT_EQ(parse_reduce_op("sum"), ReduceOp::kSum);
  EXPECT_EQ(parse_reduce_op("BXOR"), ReduceOp::kBxor);
  EXPECT_FALSE(parse_reduce_op("mean"));
}

TEST(ReduceOp, TheInCacheEntryGivesReduceHostsBitsForEveryDtypeAndOp) {
  // Odd lengths and an offset start: the blocked loop, its tail, and
  // prefetches (in reduce_host only) past both ends.
  for (std::size_t n : {0u, 1u, 63u, 64u, 1000u, 4099u}) {
    for (int d = 0; d <= static_cast<int>(DType::kBool); ++d) {
      const auto dtype = static_cast<DType>(d);
      for (int o = 0; o < kNumReduceOps; ++o) {
        const auto op = static_cast<ReduceOp>(o);
        if (reduce_op_unsupported(op, dtype)) continue;
        const std::size_t bytes = n * dtype_size(dtype);
        std::vector<std::uint8_t> a(bytes + 3), b(bytes + 3), src(bytes + 3);
        std::uint32_t x = 12345u + static_cast<std::uint32_t>(n * 31 + static_cast<std::size_t>(d * 7 + o));
        for (std::size_t k = 0; k < a.size(); ++k) {
          x = x * 1664525u + 1013904223u;
          a[k] = static_cast<std::uint8_t>(x >> 24);
          src[k] = static_cast<std::uint8_t>(x >> 16);
        }
        if (dtype == DType::kBool)
          for (std::size_t k = 0; k < a.size(); ++k) a[k] &= 1, src[k] &= 1;
        b = a;
        const std::size_t at = dtype_size(dtype) == 1 ? 3 : 0;
        reduce_host(a.data() + at, src.data() + at, n, dtype, op);
        reduce_host_in_cache(b.data() + at, src.data() + at, n, dtype, op);
        EXPECT_EQ(a, b) << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace collie
