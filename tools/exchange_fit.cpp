#include "tools/exchange_fit.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace collie::tools {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

ExchangeFit fit_exchanges(const std::vector<ExchangeSample>& samples, double overhead_us, double in_cache_min,
                          double in_cache_max) {
  auto noise = [](const std::string& why) {
    return Error(ErrorKind::kTransport, OpContext{}, "calibrate: " + why + "; the measurement is noise");
  };
  if (samples.empty()) throw noise("no exchanges were measured");
  std::vector<ExchangeSample> sorted = samples;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  ExchangeFit fit;
  fit.alpha_us = std::max(0.0, sorted.front().time_us - 2 * overhead_us);
  auto rate_GBps = [&](const ExchangeSample& e) {
    const double bytes_us = e.time_us - fit.alpha_us - 2 * overhead_us;
    if (!(bytes_us > 0))
      throw noise("an exchange of " + std::to_string(static_cast<long long>(e.bytes)) + " bytes took " +
                  std::to_string(e.time_us) + " us, no more than its latency and two per-message overheads");
    return 2 * e.bytes / bytes_us * 1e-3;  // bytes per us * 1e-3 = GB/s
  };

  // The median, not a least-squares slope: a slope is the difference of two
  // noisy times, and one slow run among four sizes would move it by half.
  std::vector<double> rates;
  for (const auto& e : sorted)
    if (e.bytes >= in_cache_min && e.bytes <= in_cache_max) rates.push_back(rate_GBps(e));
  if (rates.empty())
    throw noise("no exchange of " + std::to_string(static_cast<long long>(in_cache_min)) + ".." +
                std::to_string(static_cast<long long>(in_cache_max)) + " bytes to fit the bandwidth to");
  fit.bandwidth_GBps = median(rates);

  const double memory = rate_GBps(sorted.back());
  if (sorted.back().bytes > in_cache_max && memory < 0.9 * fit.bandwidth_GBps) {
    fit.memory_bandwidth_GBps = memory;
    const double midpoint = (fit.bandwidth_GBps + memory) / 2;
    fit.cache_bytes = static_cast<std::size_t>(2 * in_cache_min);
    for (const auto& e : sorted)
      if (e.bytes >= in_cache_min && rate_GBps(e) > midpoint) fit.cache_bytes = static_cast<std::size_t>(2 * e.bytes);
  }
  return fit;
}

}  // namespace collie::tools
