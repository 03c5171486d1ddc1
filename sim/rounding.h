// round_half_away: std::llround without the libm call, bit for bit.
//
// The simulator turns every modelled cost (nanoseconds as doubles) into
// integer nanoseconds with std::llround -- round to nearest, halves away from
// zero -- several times per message; the libm call was 2% of a large run's
// instructions. round_half_away(x) == std::llround(x) for every double x
// (sim/rounding_test.cpp checks edge values and random ones): within
// (-2^63, 2^63) it truncates and compares the dropped fraction, which
// x - trunc(x) gives exactly, with 0.5 (no x + 0.5, which rounds
// 0.49999999999999994 up); NaN and values out of that range take libm's
// path, so their results are libm's too.
#pragma once

#include <cmath>

namespace collie::sim {

inline long long round_half_away(double x) {
  constexpr double kLimit = 9223372036854775808.0;  // 2^63
  if (x >= 0 && x < kLimit) {
    const auto t = static_cast<long long>(x);
    return t + (x - static_cast<double>(t) >= 0.5 ? 1 : 0);
  }
  if (x < 0 && x > -kLimit) {
    const auto t = static_cast<long long>(x);  // toward zero
    return t - (static_cast<double>(t) - x >= 0.5 ? 1 : 0);
  }
  return std::llround(x);
}

}  // namespace collie::sim
