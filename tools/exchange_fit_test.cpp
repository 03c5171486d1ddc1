#include "tools/exchange_fit.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/error.h"

namespace collie::tools {
namespace {

constexpr double KiB = 1024, MiB = 1024 * 1024;

// An exchange on the model the fit inverts: alpha + 2 (overhead + B / rate),
// at `memory_GBps` once a rank's working set (2B) exceeds `cache`.
double exchange_us(double bytes, double alpha_us, double overhead_us, double bandwidth_GBps, double cache = 1e300,
                   double memory_GBps = 0) {
  const double rate = 2 * bytes > cache ? memory_GBps : bandwidth_GBps;
  return alpha_us + 2 * (overhead_us + bytes / (rate * 1e3));
}

std::vector<ExchangeSample> sweep(double alpha_us, double overhead_us, double bandwidth_GBps, double cache,
                                  double memory_GBps) {
  std::vector<ExchangeSample> out;
  for (double b : {8.0, 4 * KiB, 256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB, 4 * MiB, 16 * MiB, 64 * MiB})
    out.push_back({b, exchange_us(b, alpha_us, overhead_us, bandwidth_GBps, cache, memory_GBps)});
  return out;
}

TEST(ExchangeFit, RecoversTheModelItInverts) {
  const ExchangeFit f = fit_exchanges(sweep(1.5, 6.0, 5.0, 4 * MiB, 2.5), 6.0);
  EXPECT_NEAR(f.alpha_us, 1.5 + 2 * 8 / 5e3, 1e-9);
  // Within what the smallest exchange's own 8 bytes add to alpha.
  EXPECT_NEAR(f.bandwidth_GBps, 5.0, 1e-4);
  EXPECT_NEAR(f.memory_bandwidth_GBps, 2.5, 1e-4);
  // 2 MiB exchanges (working set 4 MiB) still ran at the in-cache rate.
  EXPECT_EQ(f.cache_bytes, static_cast<std::size_t>(4 * MiB));
}

TEST(ExchangeFit, NoSlowerLargeExchangesMeansNoCacheEffect) {
  const ExchangeFit f = fit_exchanges(sweep(0, 5.0, 4.0, 1e300, 0), 5.0);
  EXPECT_NEAR(f.bandwidth_GBps, 4.0, 1e-4);
  EXPECT_EQ(f.cache_bytes, 0u);
  EXPECT_EQ(f.memory_bandwidth_GBps, 0);
}

// Regression: the least-squares slope it replaced read 4.1 GB/s from a
// sweep whose sizes ran at 4.0..5.2 GB/s, because the 2 MiB run was slow.
TEST(ExchangeFit, OneSlowRunMovesTheBandwidthLittle) {
  auto samples = sweep(0, 6.0, 5.0, 4 * MiB, 2.5);
  for (auto& s : samples)
    if (s.bytes == 2 * MiB) s.time_us *= 1.3;
  const ExchangeFit f = fit_exchanges(samples, 6.0);
  EXPECT_GT(f.bandwidth_GBps, 0.95 * 5.0);
  EXPECT_LE(f.bandwidth_GBps, 5.0 * (1 + 1e-4));
}

TEST(ExchangeFit, ATimeNoLargerThanTheOverheadsIsNoise) {
  auto samples = sweep(0, 6.0, 5.0, 4 * MiB, 2.5);
  samples[3].time_us = 11.0;  // 512 KiB in less than two 6 us overheads
  EXPECT_THROW(fit_exchanges(samples, 6.0), Error);
  EXPECT_THROW(fit_exchanges({}, 6.0), Error);
  EXPECT_THROW(fit_exchanges({{8, 20}}, 6.0), Error);  // nothing in cache range
}

RC_GTEST_PROP(ExchangeFit, RecoversAnyModel, ()) {
  const double overhead = *rc::gen::inRange(0, 20000) / 1000.0;
  const double alpha = *rc::gen::inRange(0, 20000) / 1000.0;
  const double bandwidth = *rc::gen::inRange(100, 50000) / 1000.0;
  const double memory = bandwidth * *rc::gen::inRange(10, 85) / 100.0;  // clearly slower
  // At least the working set of the in-cache range's largest exchange.
  const double cache = *rc::gen::element(4 * MiB, 8 * MiB, 32 * MiB);
  const ExchangeFit f = fit_exchanges(sweep(alpha, overhead, bandwidth, cache, memory), overhead);
  RC_ASSERT(std::abs(f.bandwidth_GBps - bandwidth) < 1e-4 * bandwidth);
  RC_ASSERT(std::abs(f.memory_bandwidth_GBps - memory) < 1e-4 * memory);
  RC_ASSERT(f.cache_bytes == static_cast<std::size_t>(cache));
}

}  // namespace
}  // namespace collie::tools
