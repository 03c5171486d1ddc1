#include "tools/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/reduce_op.h"
#include "core/tensor.h"
#include "scenario/loader.h"
#include "tools/bench.h"
#include "tools/bench_command.h"
#include "tools/exchange_fit.h"
#include "tools/network_profile.h"
#include "tools/launch.h"

namespace collie::tools {

namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitInvalid = 2;
// calibrate measures time slicing's cost with cores + 1 processes on
// hosts of at most this many cores.
constexpr int kMaxCoresForOversubscription = 16;
// Every measurement is the best of this many rounds. Rounds rather than
// back-to-back repeats: this host's speed drifts over tens of seconds, and
// a series measured in one slow stretch would be slow in every repeat;
// across rounds, each series sees the same stretches as every other.
constexpr int kRounds = 3;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string temp_path(const std::string& stem) {
  return "/tmp/collie-calibrate-" + std::to_string(::getpid()) + "-" + stem + ".json";
}

// `collie bench --backend tcp` as N real processes; rank 0's rows.
std::vector<BenchRow> measure_tcp(const std::string& op, int nranks, const std::string& sizes) {
  const std::string rows = temp_path(op + "-" + std::to_string(nranks));
  const std::string cmd = quote(self_executable()) + " bench --backend tcp -n " + std::to_string(nranks) +
                          " --op " + op + " --sizes " + sizes + " --no-check --rows-json " + quote(rows) +
                          " > /dev/null";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(rows, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  std::remove(rows.c_str());
  if (rc != 0 || text.str().empty())
    throw Error(ErrorKind::kTransport, OpContext{}, "calibrate: the measurement failed: " + cmd);
  return rows_from_json(text.str());
}

// One series of measurements: `collie bench --backend tcp` of `op` at
// world `world` over `sizes`, run once per round; `best` holds each size's
// smallest time so far (the host is shared, and contention only ever makes
// a run slower).
struct Series {
  std::string op;
  int world = 2;
  std::string sizes;
  std::vector<BenchRow> best;
};

void measure_once(Series& s) {
  const auto rows = measure_tcp(s.op, s.world, s.sizes);
  if (s.best.empty()) {
    s.best = rows;
    return;
  }
  for (std::size_t i = 0; i < s.best.size() && i < rows.size(); ++i)
    if (rows[i].time_us < s.best[i].time_us) s.best[i] = rows[i];
}

// gamma: bytes of dst per second for dst = dst + src (float32), one core,
// on operands of `bytes`: 256 KiB for the in-cache rate (the ring's
// segments, reduced as they arrive), 64 MiB for the rate from memory.
double measure_reduce_GBps(std::int64_t bytes) {
  const std::int64_t count = bytes / 4;
  Tensor dst(DType::kFloat32, {count}), src(DType::kFloat32, {count});
  for (std::int64_t i = 0; i < count; i += 64) src.as<float>()[i] = 1.0f;
  const int reps = static_cast<int>(std::max<std::int64_t>(2, (std::int64_t{50} << 20) / bytes));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < reps; ++rep)
      reduce_host(dst.data(), src.data(), static_cast<std::size_t>(count), DType::kFloat32, ReduceOp::kSum);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return static_cast<double>(dst.bytes()) / best / 1e9;
}

// Simulated time of `op` at world `w` for each of `sizes` on profile `m`.
std::vector<BenchRow> predict(const sim::NetworkModel& m, const std::string& op, int w,
                              const std::vector<std::uint64_t>& sizes) {
  BenchOptions o;
  o.check = false;
  o.warmup_iters = 1;
  o.iters = 2;  // virtual time without jitter: every iteration costs the same
  o.op = op;
  o.sizes = sizes;
  validate(o, w);
  return bench_in_process(o, "sim", w, 1, m);
}

// Time slicing's cost: from ring shifts (each rank sends to the next and
// receives from the previous) with one rank more than the host has cores,
// the factor on every CPU cost that makes the simulator match them (the
// median relative error over the sizes is 0; bisection: the simulated time
// grows with it). 1 when the model is already as slow. A factor rather than
// a per-message overhead: the shifts' excess over the model grows with the
// message (caches refill after each switch), by about the same ratio from
// 64 KiB to 1 MiB on this project's 2-core VM.
double fit_oversubscribed_cpu_factor(const sim::NetworkModel& base, const Series& shifts) {
  const int w = shifts.world;
  const auto& measured = shifts.best;
  std::vector<std::uint64_t> sizes;
  for (const auto& r : measured) sizes.push_back(r.bytes);
  auto excess = [&](double factor) {
    sim::NetworkModel m = base;
    m.oversubscribed_cpu_factor = factor;
    const auto predicted = predict(m, "sendrecv", w, sizes);
    std::vector<double> errs;
    for (std::size_t i = 0; i < measured.size() && i < predicted.size(); ++i)
      if (measured[i].time_us > 0) errs.push_back((predicted[i].time_us - measured[i].time_us) / measured[i].time_us);
    return median(errs);
  };
  if (excess(1) >= 0) return 1;
  double lo = 1, hi = 2;
  while (excess(hi) < 0 && hi < 1e3) hi *= 2;
  for (int i = 0; i < 30; ++i) {
    const double mid = (lo + hi) / 2;
    (excess(mid) < 0 ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// The micro-benchmarks a profile is fitted from (the collectives being
// validated are never among them).
struct CalibrationSeries {
  // Exchanges between 2 ranks: bandwidth from 256 KiB..2 MiB (in cache: the
  // ring's segments are 256 KiB); the rate from memory from 64 MiB, and the
  // cache size where the rate falls from one to the other.
  Series exchange{"sendrecv", 2, "8,64,512,4K,256K,512K,1M,2M,4M,8M,16M,64M", {}};
  // A stream of 8-byte broadcasts at world 2: one message per CPU overhead.
  Series stream{"broadcast", 2, "8", {}};
  // Ring shifts with one rank more than the host has cores (measured where
  // that is cheap: a few cores).
  Series shifts{"sendrecv", 0, "64K,256K,1M", {}};
  double reduce_GBps = 0;  // best in-cache reduction rate so far
  int cores = 1;

  CalibrationSeries() : cores(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
    shifts.world = cores + 1;
  }
  bool oversubscription_measured() const { return cores <= kMaxCoresForOversubscription; }
  std::vector<Series*> series() {
    std::vector<Series*> out{&exchange, &stream};
    if (oversubscription_measured()) out.push_back(&shifts);
    return out;
  }
  void measure_reduction() { reduce_GBps = std::max(reduce_GBps, measure_reduce_GBps(256 << 10)); }
};

sim::NetworkModel fit_profile(const CalibrationSeries& cal) {
  const auto& rows = cal.exchange.best;
  const auto& stream = cal.stream.best;
  sim::NetworkModel m;
  m.ranks_per_node = 0;  // one host: every pair uses `intra`
  m.cpu_bound = true;    // loopback TCP: the ranks' CPUs move the bytes
  m.cores_per_node = cal.cores;
  m.overhead_us = stream.empty() ? 0 : stream.front().time_us;
  std::vector<ExchangeSample> samples;
  for (const auto& r : rows) samples.push_back({static_cast<double>(r.bytes), r.time_us});
  const ExchangeFit fit = fit_exchanges(samples, m.overhead_us);
  m.intra.alpha_us = fit.alpha_us;
  m.intra.bandwidth_GBps = fit.bandwidth_GBps;
  m.inter = m.intra;
  m.reduce_GBps = cal.reduce_GBps;
  m.cache_bytes = fit.cache_bytes;
  m.memory_bandwidth_GBps = fit.memory_bandwidth_GBps;
  // memory_reduce_GBps stays 0: the TCP backend reduces a payload as it
  // arrives, from its staging buffer, so the in-cache rate applies.
  m.jitter_fraction = 0;
  if (cal.oversubscription_measured()) m.oversubscribed_cpu_factor = fit_oversubscribed_cpu_factor(m, cal.shifts);
  return m;
}

void write_profile(const CalibrateCommand& c, const CalibrationSeries& cal, const sim::NetworkModel& m) {
  const auto& rows = cal.exchange.best;
  std::vector<std::pair<std::uint64_t, double>> exchange_us;
  for (const auto& r : rows) exchange_us.emplace_back(r.bytes, r.time_us);
  const std::string yaml = network_profile_yaml(m, exchange_us, c.backend, host_name() + ", " + now_text());
  std::ofstream out(c.output, std::ios::binary);
  out << yaml;
  if (!out) throw Error(ErrorKind::kUsage, OpContext{}, "calibrate: cannot write " + c.output);
  // memory_reduce_GBps 0 means "as reduce_GBps": say so rather than "0.00 GB/s".
  char memory_reduce[64];
  if (m.memory_reduce_GBps > 0) std::snprintf(memory_reduce, sizeof memory_reduce, "%.2f GB/s", m.memory_reduce_GBps);
  else std::snprintf(memory_reduce, sizeof memory_reduce, "as in cache");
  std::printf("# overhead %.2f us per message (CPU costs x%.3f with more ranks than cores), alpha %.2f us, bandwidth %.3f GB/s,"
              " reduce %.2f GB/s, %d cores; above %zu B: bandwidth %.3f GB/s, reduce %s -> %s\n",
              m.overhead_us, m.oversubscribed_cpu_factor, m.intra.alpha_us, m.intra.bandwidth_GBps, m.reduce_GBps,
              m.cores_per_node, m.cache_bytes, m.memory_bandwidth_GBps, memory_reduce, c.output.c_str());
}

// The collectives being validated: each op at each world over --sizes.
std::vector<Series> validation_series(const CalibrateCommand& c) {
  std::vector<Series> out;
  for (int w : c.worlds) {
    std::stringstream list(c.ops);
    std::string op;
    while (std::getline(list, op, ',')) out.push_back(Series{op, w, c.sizes, {}});
  }
  return out;
}

void print_validation(const CalibrateCommand& c, const sim::NetworkModel& m, const std::vector<Series>& checks,
                      int rounds) {
  std::vector<std::uint64_t> sizes;
  {
    std::stringstream list(c.sizes);
    std::string item;
    while (std::getline(list, item, ',')) sizes.push_back(parse_size(item));
  }
  std::printf("# validation: predicted (simulator, this profile) vs measured (tcp processes on this host, best of %d rounds)\n",
              rounds);
  std::printf("# %-11s %5s %10s %13s %13s %8s\n", "op", "ranks", "bytes", "measured_us", "predicted_us", "error");
  std::vector<double> large, small;
  std::map<std::string, std::vector<double>> large_by_op;
  for (const Series& check : checks) {
    const auto predicted = predict(m, check.op, check.world, sizes);
    for (const auto& meas : check.best) {
      auto p = std::find_if(predicted.begin(), predicted.end(), [&](const BenchRow& r) { return r.bytes == meas.bytes; });
      if (p == predicted.end() || meas.time_us <= 0) continue;
      const double err = (p->time_us - meas.time_us) / meas.time_us;
      std::printf("  %-11s %5d %10llu %13.1f %13.1f %+7.1f%%\n", check.op.c_str(), check.world,
                  static_cast<unsigned long long>(meas.bytes), meas.time_us, p->time_us, 100 * err);
      (meas.bytes >= 64 * 1024 ? large : small).push_back(std::fabs(err));
      if (meas.bytes >= 64 * 1024) large_by_op[check.op].push_back(std::fabs(err));
    }
  }
  for (const auto& [op, errs] : large_by_op)
    std::printf("# %-11s median |error| %5.1f%% over %zu rows of >= 64 KiB\n", op.c_str(), 100 * median(errs), errs.size());
  std::printf("# all: median |error| %.1f%% for >= 64 KiB (%zu rows; target <= 15%%: %s), %.1f%% below 64 KiB (%zu rows)\n",
              100 * median(large), large.size(), median(large) <= 0.15 ? "met" : "NOT met", 100 * median(small),
              small.size());
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, CalibrateCommand& c) {
  auto* cal = app.add_subcommand("calibrate",
                                 "measure a backend's latency, bandwidth and reduction speed; write a network profile");
  cal->add_option("--backend", c.backend, "backend to measure (tcp: real processes on this host)");
  cal->add_option("-o,--output", c.output, "profile to write (default collie-profile.yaml)");
  cal->add_flag("--validate", c.validate,
                "then compare the simulator's predictions on the profile with measured times, per collective and size");
  cal->add_option("--profile", c.profile, "with --validate: validate this profile instead of measuring a new one")
      ->check(CLI::ExistingFile);
  cal->add_option("--worlds", c.worlds, "with --validate: world sizes (default 2 3 4)")->check(CLI::Range(2, 64));
  cal->add_option("--ops", c.ops, "with --validate: collectives, comma-separated");
  cal->add_option("--sizes", c.sizes, "with --validate: message sizes, comma-separated (K, M suffixes)");
  return cal;
}

int run_calibrate_command(const CalibrateCommand& c) {
  try {
    if (c.backend != "tcp")
      throw Error(ErrorKind::kUsage, OpContext{}, "calibrate: only --backend tcp can be measured (got '" + c.backend + "')");
    // A new profile's micro-benchmarks and the validated collectives are
    // measured in the same rounds, so that the host's drift reaches both.
    CalibrationSeries cal;
    std::vector<Series> checks = c.validate ? validation_series(c) : std::vector<Series>{};
    std::vector<Series*> all;
    if (c.profile.empty()) {
      std::printf("# calibrating backend %s: 2 processes on this host (and %d for oversubscription)%s\n",
                  c.backend.c_str(), cal.shifts.world, c.validate ? ", in rounds with the validation" : "");
      all = cal.series();
    }
    for (Series& s : checks) all.push_back(&s);
    for (int round = 0; round < kRounds; ++round) {
      std::printf("# round %d of %d: %zu measurements\n", round + 1, kRounds, all.size());
      std::fflush(stdout);
      if (c.profile.empty()) cal.measure_reduction();
      for (Series* s : all) measure_once(*s);
    }
    sim::NetworkModel m;
    if (c.profile.empty()) {
      m = fit_profile(cal);
      write_profile(c, cal, m);
    } else {
      m = scenario::load_profile(c.profile);
    }
    if (c.validate) print_validation(c, m, checks, kRounds);
    return kExitOk;
  } catch (const scenario::ScenarioError& e) {
    std::cerr << e.what() << "\n";
    return kExitInvalid;
  } catch (const Error& e) {
    std::cerr << "collie " << e.what() << "\n";
    return e.kind() == ErrorKind::kUsage ? kExitInvalid : kExitFailed;
  }
}

}  // namespace collie::tools
