// The cpu_bound link fitted to exchanges between 2 ranks on one host (each
// rank sends B bytes to the other at once, as every ring step does). In the
// simulator's cpu_bound model such an exchange costs each rank
//   t(B) = alpha + 2 * (overhead + B / bandwidth)
// (its send and its receive share one CPU), so each sample gives a rate
//   rate(B) = 2B / (t(B) - alpha - 2 * overhead)
// of bytes through a rank's CPU. A pure function of its samples: tested
// without a network.
#pragma once

#include <cstddef>
#include <vector>

namespace collie::tools {

struct ExchangeSample {
  double bytes = 0;    // each rank's message
  double time_us = 0;  // one exchange, the best of several runs
};

struct ExchangeFit {
  double alpha_us = 0;        // what the smallest exchange leaves after 2 overheads, >= 0
  // In cache: the median rate of the exchanges of [in_cache_min,
  // in_cache_max] bytes (assumed to fit: a working set of 2 * in_cache_max).
  double bandwidth_GBps = 0;
  // Where the largest exchange is clearly slower (its rate below 90% of
  // bandwidth): its rate, and the largest working set still closer to the
  // in-cache rate than to it. A rank of an exchange holds both messages, so
  // its working set is 2B. Both 0 when no exchange is clearly slower.
  double memory_bandwidth_GBps = 0;
  std::size_t cache_bytes = 0;
};

// The middle value of v (the mean of the two middle ones for an even
// count); 0 for none.
double median(std::vector<double> v);

// Requires: at least one sample in [in_cache_min, in_cache_max], and every
// sample of at least in_cache_min slower than the smallest one and than
// 2 * overhead_us (else the fit has nothing left for the bytes); throws collie::Error (kTransport: the measurement is noise)
// otherwise.
ExchangeFit fit_exchanges(const std::vector<ExchangeSample>& samples, double overhead_us,
                          double in_cache_min = 256 * 1024, double in_cache_max = 2 * 1024 * 1024);

}  // namespace collie::tools
