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
#include "tools/launch.h"

namespace collie::tools {

namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitInvalid = 2;
// calibrate measures the oversubscribed overhead with cores + 1 processes on
// hosts of at most this many cores.
constexpr int kMaxCoresForOversubscription = 16;

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

// The best (smallest) time of each size over `runs` separate runs: the host
// is shared, and contention only ever makes a run slower.
std::vector<BenchRow> measure_tcp_best(const std::string& op, int nranks, const std::string& sizes, int runs = 3) {
  std::vector<BenchRow> best = measure_tcp(op, nranks, sizes);
  for (int run = 1; run < runs; ++run) {
    const auto rows = measure_tcp(op, nranks, sizes);
    for (std::size_t i = 0; i < best.size() && i < rows.size(); ++i)
      if (rows[i].time_us < best[i].time_us) best[i] = rows[i];
  }
  return best;
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

// The oversubscribed overhead: ring shifts (each rank sends to the next and
// receives from the previous) with one rank more than the host has cores,
// and the per-message cost that makes the simulator match them (bisection:
// the simulated time grows with it). 0 when the model is already as slow.
double measure_oversubscribed_overhead_us(const sim::NetworkModel& base) {
  const int w = base.cores_per_node + 1;
  const std::vector<std::uint64_t> sizes{256 << 10, 1 << 20};
  const auto measured = measure_tcp_best("sendrecv", w, "256K,1M");
  auto excess = [&](double us) {  // median relative error of the prediction
    sim::NetworkModel m = base;
    m.oversubscribed_overhead_us = us;
    const auto predicted = predict(m, "sendrecv", w, sizes);
    std::vector<double> errs;
    for (std::size_t i = 0; i < measured.size() && i < predicted.size(); ++i)
      if (measured[i].time_us > 0) errs.push_back((predicted[i].time_us - measured[i].time_us) / measured[i].time_us);
    std::sort(errs.begin(), errs.end());
    return errs.empty() ? 0.0 : errs[errs.size() / 2];
  };
  if (excess(0) >= 0) return 0;
  double lo = 0, hi = 1;
  while (excess(hi) < 0 && hi < 1e5) hi *= 2;
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

sim::NetworkModel measure_profile(const CalibrateCommand& c) {
  std::cout << "# calibrating backend " << c.backend << ": 2 processes on this host\n" << std::flush;
  // Bandwidth from exchanges of 256 KiB..2 MiB (in cache: the ring's
  // segments are 256 KiB); the rate from memory from 64 MiB, and the cache
  // size where the rate falls from one to the other.
  const auto rows = measure_tcp_best("sendrecv", 2, "8,64,512,4K,256K,512K,1M,2M,4M,8M,16M,64M");
  // A stream of 8-byte broadcasts at world 2: one message per CPU overhead.
  const auto stream = measure_tcp_best("broadcast", 2, "8");
  std::vector<ExchangeSample> samples;
  for (const auto& r : rows)
    if (r.bytes <= (2 << 20)) samples.push_back({static_cast<double>(r.bytes), r.time_us});
  const sim::LinkModel exchange = fit_link(samples, 256 * 1024);
  sim::NetworkModel m;
  m.ranks_per_node = 0;  // one host: every pair uses `intra`
  m.cpu_bound = true;    // loopback TCP: the ranks' CPUs move the bytes
  m.cores_per_node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.overhead_us = stream.empty() ? 0 : stream.front().time_us;
  // An exchange costs each rank 2 (overhead + B / bandwidth): its send and
  // its receive share one CPU. The latency is what the overheads leave.
  m.intra.alpha_us = std::max(0.0, exchange.alpha_us - 2 * m.overhead_us);
  m.intra.bandwidth_GBps = 2 * exchange.bandwidth_GBps;
  m.inter = m.intra;
  m.reduce_GBps = measure_reduce_GBps(256 << 10);
  // Each exchange moves 2B per rank; the rate of each size, and the largest
  // size still closer to the in-cache rate than to the rate from memory.
  auto rate_GBps = [&](const BenchRow& r) {
    return 2.0 * static_cast<double>(r.bytes) / std::max(1e-3, r.time_us - 2 * m.overhead_us) * 1e-3;
  };
  const BenchRow& largest = rows.back();
  const double memory = rate_GBps(largest);
  if (memory < 0.9 * m.intra.bandwidth_GBps) {
    m.memory_bandwidth_GBps = memory;
    m.cache_bytes = 256 << 10;
    for (const auto& r : rows)
      if (r.bytes >= (256 << 10) && rate_GBps(r) > (m.intra.bandwidth_GBps + memory) / 2) m.cache_bytes = r.bytes;
    // memory_reduce_GBps stays 0: the TCP backend reduces a payload as it
    // arrives, from its staging buffer, so the in-cache rate applies
    // (measure_reduce_GBps(64 << 20) is the rate a whole-buffer reduction
    // would have).
  }
  m.jitter_fraction = 0;
  // More ranks than cores: measured where it is cheap to (a few cores).
  if (m.cores_per_node <= kMaxCoresForOversubscription) m.oversubscribed_overhead_us = measure_oversubscribed_overhead_us(m);

  std::ofstream out(c.output, std::ios::binary);
  out << "# collie network profile, measured by `collie calibrate --backend " << c.backend << "`\n"
      << "# on " << host_name() << ", " << now_text() << ". Scenarios use it with\n"
      << "# network: {profile: FILE}; collie run --profile FILE; collie bench --backend sim --profile FILE.\n"
      << "version: 1\n"
      << "backend: " << c.backend << "\n"
      << "measured:\n"
      << "  # time of one exchange between 2 ranks (each sends to the other), microseconds\n"
      << "  exchange_us: {";
  for (std::size_t i = 0; i < rows.size(); ++i)
    out << (i ? ", " : "") << rows[i].bytes << ": " << rows[i].time_us;
  out << "}\n"
      << "network:\n"
      << "  ranks_per_node: 0\n"
      << "  cpu_bound: true\n"
      << "  cores_per_node: " << m.cores_per_node << "\n"
      << "  overhead_us: " << m.overhead_us << "\n"
      << "  oversubscribed_overhead_us: " << m.oversubscribed_overhead_us << "\n"
      << "  intra: {alpha_us: " << m.intra.alpha_us << ", bandwidth_GBps: " << m.intra.bandwidth_GBps << "}\n"
      << "  inter: {alpha_us: " << m.inter.alpha_us << ", bandwidth_GBps: " << m.inter.bandwidth_GBps << "}\n"
      << "  reduce_GBps: " << m.reduce_GBps << "\n"
      << "  cache_bytes: " << m.cache_bytes << "\n"
      << "  memory_bandwidth_GBps: " << m.memory_bandwidth_GBps << "\n"
      << "  memory_reduce_GBps: " << m.memory_reduce_GBps << "\n"
      << "  eager_threshold_bytes: " << m.eager_threshold_bytes << "\n"
      << "  jitter: 0\n";
  if (!out) throw Error(ErrorKind::kUsage, OpContext{}, "calibrate: cannot write " + c.output);
  std::printf("# overhead %.2f us per message (%.2f more with more ranks than cores), alpha %.2f us, bandwidth %.3f GB/s,"
              " reduce %.2f GB/s, %d cores; above %zu B: bandwidth %.3f GB/s, reduce %.2f GB/s -> %s\n",
              m.overhead_us, m.oversubscribed_overhead_us, m.intra.alpha_us, m.intra.bandwidth_GBps, m.reduce_GBps,
              m.cores_per_node, m.cache_bytes, m.memory_bandwidth_GBps, m.memory_reduce_GBps, c.output.c_str());
  return m;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void validate_profile(const CalibrateCommand& c, const sim::NetworkModel& m) {
  std::vector<std::string> ops;
  {
    std::stringstream list(c.ops);
    std::string op;
    while (std::getline(list, op, ',')) ops.push_back(op);
  }
  std::vector<std::uint64_t> sizes;
  {
    std::stringstream list(c.sizes);
    std::string item;
    while (std::getline(list, item, ',')) sizes.push_back(parse_size(item));
  }
  std::printf("# validation: predicted (simulator, this profile) vs measured (tcp processes on this host, best of 3 runs)\n");
  std::printf("# %-11s %5s %10s %13s %13s %8s\n", "op", "ranks", "bytes", "measured_us", "predicted_us", "error");
  std::vector<double> large, small;
  std::map<std::string, std::vector<double>> large_by_op;
  for (int w : c.worlds) {
    for (const auto& op : ops) {
      const auto predicted = predict(m, op, w, sizes);
      const auto measured = measure_tcp_best(op, w, c.sizes);
      for (const auto& meas : measured) {
        auto p = std::find_if(predicted.begin(), predicted.end(), [&](const BenchRow& r) { return r.bytes == meas.bytes; });
        if (p == predicted.end() || meas.time_us <= 0) continue;
        const double err = (p->time_us - meas.time_us) / meas.time_us;
        std::printf("  %-11s %5d %10llu %13.1f %13.1f %+7.1f%%\n", op.c_str(), w,
                    static_cast<unsigned long long>(meas.bytes), meas.time_us, p->time_us, 100 * err);
        (meas.bytes >= 64 * 1024 ? large : small).push_back(std::fabs(err));
        if (meas.bytes >= 64 * 1024) large_by_op[op].push_back(std::fabs(err));
      }
      std::fflush(stdout);
    }
  }
  for (const auto& [op, errs] : large_by_op)
    std::printf("# %-11s median |error| %5.1f%% over %zu rows of >= 64 KiB\n", op.c_str(), 100 * median(errs), errs.size());
  std::printf("# all: median |error| %.1f%% for >= 64 KiB (%zu rows; target <= 15%%: %s), %.1f%% below 64 KiB (%zu rows)\n",
              100 * median(large), large.size(), median(large) <= 0.15 ? "met" : "NOT met", 100 * median(small),
              small.size());
}

}  // namespace

sim::LinkModel fit_link(const std::vector<ExchangeSample>& samples, double large_bytes) {
  if (samples.empty()) throw Error(ErrorKind::kUsage, OpContext{}, "calibrate: no samples to fit");
  sim::LinkModel l;
  auto smallest = std::min_element(samples.begin(), samples.end(),
                                   [](const ExchangeSample& a, const ExchangeSample& b) { return a.bytes < b.bytes; });
  l.alpha_us = smallest->time_us;
  // Least squares t = a + bytes * s over the large samples; bandwidth = 1/s.
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& e : samples) {
    if (e.bytes < large_bytes) continue;
    n += 1;
    sx += e.bytes;
    sy += e.time_us;
    sxx += e.bytes * e.bytes;
    sxy += e.bytes * e.time_us;
  }
  const double denom = n * sxx - sx * sx;
  if (n < 2 || denom <= 0)
    throw Error(ErrorKind::kUsage, OpContext{}, "calibrate: bandwidth needs two samples of different sizes >= " +
                                                    std::to_string(static_cast<long long>(large_bytes)) + " bytes");
  const double slope_us_per_byte = (n * sxy - sx * sy) / denom;
  if (!(slope_us_per_byte > 0))
    throw Error(ErrorKind::kTransport, OpContext{}, "calibrate: larger exchanges were not slower; the measurement is noise");
  l.bandwidth_GBps = 1e-3 / slope_us_per_byte;  // bytes/us * 1e-3 = GB/s
  return l;
}

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
    sim::NetworkModel m = c.profile.empty() ? measure_profile(c) : scenario::load_profile(c.profile);
    if (c.validate) validate_profile(c, m);
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
