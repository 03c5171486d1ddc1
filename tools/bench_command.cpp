#include "tools/bench_command.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_backend.h"
#include "backends/registry.h"
#include "backends/tcp/process_group.h"
#include "core/error.h"
#include "core/local_world.h"
#include "core/memory_guard.h"
#include "scenario/loader.h"
#include "sim/simulation_options.h"

namespace collie::tools {

namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitInvalid = 2;

void resolve(BenchCommand& c) {
  BenchOptions& o = c.bench;
  o.min_bytes = parse_size(c.min_bytes);
  o.max_bytes = parse_size(c.max_bytes);
  auto dt = parse_dtype(c.dtype);
  if (!dt) throw Error(ErrorKind::kUsage, OpContext{}, "bench: unknown dtype '" + c.dtype + "'");
  o.dtype = *dt;
  auto op = parse_reduce_op(c.reduce_op);
  if (!op) throw Error(ErrorKind::kUsage, OpContext{}, "bench: unknown reduce op '" + c.reduce_op + "'");
  o.reduce_op = *op;
  if (c.algorithm != "auto") {
    auto a = parse_algorithm(c.algorithm);
    if (!a) throw Error(ErrorKind::kUsage, OpContext{}, "bench: unknown algorithm '" + c.algorithm + "'");
    o.algorithm = *a;
  }
  o.check = !c.no_check;
  if (!c.sizes.empty()) {
    o.sizes.clear();
    std::stringstream list(c.sizes);
    std::string item;
    while (std::getline(list, item, ',')) o.sizes.push_back(parse_size(item));
  }
  if (!c.profile.empty()) {
    try {
      c.network = scenario::load_profile(c.profile);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kUsage, OpContext{}, std::string("bench: --profile: ") + e.what());
    }
  }
  validate(o, c.nranks);
  // collie run's guard: what the ranks' buffers take at the largest size,
  // before anything is allocated (-n 1024 -e 64M is 64 GiB of all_reduce).
  if (auto over = over_memory_guard(bench_memory_bytes(o, c.nranks)))
    throw Error(ErrorKind::kUsage, OpContext{},
                "bench: " + o.op + " on " + std::to_string(c.nranks) + " ranks at its largest size " + *over +
                    " for its buffers alone; give a smaller --max-bytes or --sizes, or fewer ranks");
}

void write_rows(const BenchCommand& c, const std::vector<BenchRow>& rows) {
  if (c.rows_json.empty()) return;
  std::ofstream f(c.rows_json, std::ios::binary);
  f << rows_to_json(rows);
}

bool any_wrong(const std::vector<BenchRow>& rows) {
  for (const auto& r : rows)
    if (r.wrong > 0) return true;
  return false;
}

// One rank of a launched tcp job.
int run_as_rank(const BenchCommand& c) {
  auto pg = tcp::ProcessGroup::init();
  // Rank 0 prints the table, each row as it is measured.
  std::optional<BenchTable> table;
  if (pg->rank() == 0)
    table.emplace(std::cout, c.bench, pg->world_size(),
                  "backend tcp: " + std::to_string(pg->world_size()) + " processes on 127.0.0.1, wall time");
  pg->run([&](Communicator& comm) {
    return bench_rank(comm, c.bench, table ? RowSink([&](const BenchRow& r) { table->row(r); }) : RowSink());
  });
  if (!table) return kExitOk;
  table->finish();
  write_rows(c, table->rows());
  return any_wrong(table->rows()) ? kExitFailed : kExitOk;
}

// Every rank's timed loop in its own process (a process job), the table
// printed here: one request to the ranks per size, so that each row is
// printed as it is measured (each size is measured on its own anyway:
// warmup, barrier, timed iterations, check).
int run_as_processes(const BenchCommand& c, const BackendInfo& info) {
  JobOptions jo;
  jo.world_size = c.nranks;
  jo.seed = c.seed;
  std::optional<BenchTable> table;
  try {
    auto job = start_job(info, jo, true);
    table.emplace(std::cout, c.bench, c.nranks,
                  "backend " + c.backend + " (" + job->implementation() + "): " + std::to_string(c.nranks) +
                      " processes, each timing its own ops, wall time");
    for (std::uint64_t bytes : bench_sizes(c.bench)) {
      BenchOptions one = c.bench;
      one.sizes = {bytes};
      for (const BenchRow& r : rows_from_json(job->bench_in_ranks(bench_options_to_json(one).dump()))) table->row(r);
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUsage) throw;
    std::cerr << "collie bench: " << e.what() << "\n";
    return kExitFailed;
  }
  table->finish();
  write_rows(c, table->rows());
  return any_wrong(table->rows()) ? kExitFailed : kExitOk;
}

// The ceiling a device backend's bus bandwidth is read against: the
// runtime's own device-to-device copy rate, and the best row's busbw as a
// ratio of it.
void print_device_copy_rate(const cuda::CudaBackendSpec& spec, const BenchCommand& c, const std::vector<BenchRow>& rows) {
  const std::size_t bytes = std::clamp<std::uint64_t>(c.bench.max_bytes, 1u << 20, 64u << 20);
  const double rate = cuda::device_copy_rate_GBps(spec, bytes, 20, c.seed);
  double best = 0;
  for (const BenchRow& r : rows) best = std::max(best, r.busbw_GBps);
  std::printf("# device-to-device copy on device 0 (%zu MiB, the runtime's own copies): %.3f GB/s; "
              "best busbw is %.3fx of it\n",
              bytes >> 20, rate, rate > 0 ? best / rate : 0.0);
}

int run_in_process(const BenchCommand& c) {
  const BackendInfo* info = BackendRegistry::builtin().find(c.backend);
  std::string what = "backend " + c.backend;
  if (info->simulated) {
    char net[320];
    std::snprintf(net, sizeof net,
                  " (virtual time; %d ranks per node, intra %.2f us %.2f GB/s, inter %.2f us %.2f GB/s, reduce %.2f GB/s%s%s)",
                  c.network.ranks_per_node, c.network.intra.alpha_us, c.network.intra.bandwidth_GBps,
                  c.network.inter.alpha_us, c.network.inter.bandwidth_GBps, c.network.reduce_GBps,
                  c.profile.empty() ? "" : "; profile ", c.profile.c_str());
    what += net;
  } else {
    what += " (every rank in this process, wall time)";
  }
  // The header now, each row as it is measured.
  BenchTable table(std::cout, c.bench, c.nranks, what);
  std::uint64_t events = 0;
  const auto wall0 = std::chrono::steady_clock::now();
  try {
    (void)bench_in_process(c.bench, c.backend, c.nranks, c.seed, c.network, &events,
                           [&](const BenchRow& r) { table.row(r); });
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUsage) throw;
    std::cerr << "collie bench: " << e.what() << "\n";
    return kExitFailed;
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  table.finish();
  write_rows(c, table.rows());
  if (const auto spec = cuda::parse_cuda_backend(c.backend)) print_device_copy_rate(*spec, c, table.rows());
  if (info->simulated) {
    std::printf("# simulated %llu events in %.2f s of wall time (%.0f events/s)\n",
                static_cast<unsigned long long>(events), wall_s,
                wall_s > 0 ? static_cast<double>(events) / wall_s : 0.0);
  }
  return any_wrong(table.rows()) ? kExitFailed : kExitOk;
}

}  // namespace

std::vector<BenchRow> bench_in_process(const BenchOptions& o, const std::string& backend, int nranks,
                                       std::uint64_t seed, const sim::NetworkModel& network, std::uint64_t* events,
                                       const RowSink& on_row) {
  const BackendInfo& info = BackendRegistry::builtin().require(backend);
  BenchOptions timed = o;
  timed.wall_clock = info.logical_clock;
  JobOptions jo;
  jo.world_size = nranks;
  jo.seed = seed;
  jo.eager_threshold_bytes = network.eager_threshold_bytes;
  sim::SimulationOptions simulation;
  simulation.network = network;
  if (info.simulated) jo.simulation = &simulation;
  auto job = start_job(info, jo, false);
  std::vector<BenchRow> rows;
  RunResult res = job->run([&](Dist& d) {
                             return bench_rank(d, timed, [&](const BenchRow& r) {
                               rows.push_back(r);
                               if (on_row) on_row(r);
                             });
                           },
                           RunContext{"seed " + std::to_string(seed), "", {}, {}});
  if (!res.ok()) throw Error(ErrorKind::kTransport, OpContext{}, res.describe());
  if (events) *events = job->events();
  return rows;
}

std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  unsigned long long v = 0;
  // Digits first: stoull would read "-1" as 2^64 - 1.
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    try {
      v = std::stoull(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  std::uint64_t mult = 1;
  const std::string rest = text.substr(used);
  if (rest == "K" || rest == "k") mult = 1ull << 10;
  else if (rest == "M" || rest == "m") mult = 1ull << 20;
  else if (rest == "G" || rest == "g") mult = 1ull << 30;
  else if (!rest.empty() || used == 0)
    throw Error(ErrorKind::kUsage, OpContext{}, "bench: '" + text + "' is not a size (e.g. 8, 64K, 1M, 2G)");
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(v), mult, &bytes) || bytes > (1ull << 40))
    throw Error(ErrorKind::kUsage, OpContext{}, "bench: '" + text + "' is more than 1 TiB");
  return bytes;
}

CLI::App* add_bench_command(CLI::App& app, BenchCommand& c) {
  auto* b = app.add_subcommand("bench", "time one op over a range of sizes (nccl-tests-style table)");
  b->add_option("--backend", c.backend, "sim (virtual time), tcp (real processes), mpi, torch:NAME, or a plugin");
  b->add_option("--op", c.bench.op, "all_reduce, broadcast, reduce, all_gather, scatter, gather, reduce_scatter, all_to_all, barrier, sendrecv");
  b->add_option("-n,--nranks", c.nranks, "number of ranks")->check(CLI::Range(1, 1 << 20));
  b->add_option("-b,--min-bytes", c.min_bytes, "smallest size (default 8; K, M, G suffixes)");
  b->add_option("-e,--max-bytes", c.max_bytes, "largest size (default 64M)");
  b->add_option("-f,--step-factor", c.bench.step_factor, "size multiplier between rows (default 2)");
  b->add_option("--iters", c.bench.iters, "timed iterations per size (default: by size, 1000 down to 5)")
      ->check(CLI::Range(1, 1 << 30));
  b->add_option("-w,--warmup", c.bench.warmup_iters, "untimed iterations per size (default 5)")
      ->check(CLI::Range(0, 1 << 30));
  b->add_option("--dtype", c.dtype, "element type (default float32)");
  b->add_option("--redop", c.reduce_op, "reduce op for all_reduce/reduce (default sum)");
  b->add_option("--algorithm", c.algorithm, "force an algorithm (ring, recursive_doubling, ...)");
  b->add_option("--root", c.bench.root, "root of rooted collectives (default 0)");
  b->add_flag("--no-check", c.no_check, "do not verify results");
  b->add_option("--seed", c.seed, "seed of the simulator's random choices");
  b->add_option("--ranks-per-node", c.network.ranks_per_node, "sim: consecutive ranks per node (0: one node)")
      ->check(CLI::Range(0, 1 << 20));
  b->add_option("--intra-alpha-us", c.network.intra.alpha_us, "sim: latency within a node")->check(CLI::NonNegativeNumber);
  b->add_option("--intra-GBps", c.network.intra.bandwidth_GBps, "sim: bandwidth within a node")->check(CLI::PositiveNumber);
  b->add_option("--inter-alpha-us", c.network.inter.alpha_us, "sim: latency between nodes")->check(CLI::NonNegativeNumber);
  b->add_option("--inter-GBps", c.network.inter.bandwidth_GBps, "sim: bandwidth between nodes")->check(CLI::PositiveNumber);
  b->add_option("--reduce-GBps", c.network.reduce_GBps, "sim: reduction throughput per rank (0: free)")
      ->check(CLI::NonNegativeNumber);
  c.flags.add_to(*b);
  b->add_option("--sizes", c.sizes, "exactly these sizes, comma-separated (e.g. 8,64K,1M), instead of -b/-e/-f");
  b->add_option("--profile", c.profile, "sim: simulate this network profile (written by collie calibrate)")
      ->check(CLI::ExistingFile);
  b->add_option("--rows-json", c.rows_json, "also write the rows as JSON to this file")->group("");
  b->add_flag("--as-rank", c.as_rank, "internal: run as one rank of a launched job")->group("");
  return b;
}

int run_bench_command(BenchCommand& c) {
  try {
    resolve(c);
    if (const int rc = c.flags.apply()) return rc;
    if (c.as_rank) return run_as_rank(c);
    const BackendInfo& info = BackendRegistry::builtin().require(c.backend);
    if (info.start && (!info.create || c.backend == "tcp")) return run_as_processes(c, info);
    return run_in_process(c);
  } catch (const Error& e) {
    std::cerr << "collie " << e.what() << "\n";
    return e.kind() == ErrorKind::kUsage ? kExitInvalid : kExitFailed;
  }
}

}  // namespace collie::tools
