// round_half_away equals std::llround bit for bit: the simulator's virtual
// times (and so every pinned trace hash) depend on it.
#include "sim/rounding.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace collie::sim {
namespace {

TEST(Rounding, EqualsLlroundAtEdgeValues) {
  const double two52 = 4503599627370496.0, two53 = 2 * two52, two63 = 9223372036854775808.0;
  std::vector<double> xs = {0.0,
                            0.5,
                            1.5,
                            2.5,
                            1e-300,
                            std::numeric_limits<double>::denorm_min(),
                            0.49999999999999994,  // the largest double below 0.5: x + 0.5 rounds it up
                            std::nextafter(0.5, 1.0),
                            std::nextafter(1.5, 0.0),
                            std::nextafter(2.5, 3.0),
                            4503599627370495.5,  // 2^52 - 0.5
                            two52,
                            two52 + 1,
                            two53 - 1,
                            two53,
                            two53 + 2,
                            4611686018427387904.0,  // 2^62
                            std::nextafter(two63, 0.0),
                            123456789.5,
                            17793000.49999999,
                            1e18 + 0.5};
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  xs.push_back(-0.0);
  for (double x : xs) EXPECT_EQ(round_half_away(x), std::llround(x)) << "x = " << x;
}

TEST(Rounding, OutOfRangeTakesLlroundsPath) {
  // llround's result here is unspecified by C; round_half_away gives libm's.
  for (double x : {9223372036854775808.0, -9223372036854775808.0, 1e300, -1e300,
                   std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    EXPECT_EQ(round_half_away(x), std::llround(x)) << "x = " << x;
}

RC_GTEST_PROP(Rounding, EqualsLlroundOnAnyFiniteDoubleInRange, (std::uint64_t bits)) {
  const double x = std::bit_cast<double>(bits);
  RC_PRE(std::isfinite(x) && std::fabs(x) < 9223372036854775808.0);
  RC_ASSERT(round_half_away(x) == std::llround(x));
}

RC_GTEST_PROP(Rounding, EqualsLlroundOnHalvesAndNearHalves, (std::uint32_t whole, int step)) {
  // n + 0.5 and its neighbours a few ulps either side.
  double x = static_cast<double>(whole) + 0.5;
  const int steps = step % 5;
  for (int i = 0; i < (steps < 0 ? -steps : steps); ++i) x = std::nextafter(x, steps < 0 ? 0.0 : 1e300);
  RC_ASSERT(round_half_away(x) == std::llround(x));
  RC_ASSERT(round_half_away(-x) == std::llround(-x));
}

}  // namespace
}  // namespace collie::sim
