// `collie bench`: its command-line options and how it runs on each backend.
//
//   collie bench --backend sim -n 1024 --ranks-per-node 8 --op all_reduce
//       every rank in this process on the simulator; times are virtual.
//   collie bench --backend tcp -n 4 --op all_gather
//       four real processes on this host (collie launch), wall time.
//   collie bench --backend mpi -n 4 / --backend torch:gloo -n 4
//       one process per rank, each timing its own ops with the library.
//   other in-process backends (plugins) run like sim, in wall time.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dist.h"
#include "sim/network_model.h"
#include "tools/backend_flags.h"
#include "tools/bench.h"

namespace collie::tools {

struct BenchCommand {
  BenchOptions bench;
  std::string backend = "sim";
  int nranks = 2;
  std::uint64_t seed = 1;
  sim::NetworkModel network;  // --backend sim
  std::string min_bytes = "8", max_bytes = "64M";
  std::string dtype = "float32", reduce_op = "sum", algorithm = "auto";
  bool no_check = false;
  std::string sizes;            // "8,1K,64M": exactly these sizes
  std::string profile;          // sim: the network profile to simulate (collie calibrate)
  std::string rows_json;        // write the rows as JSON here (rank 0), for collie calibrate
  bool as_rank = false;  // internal: this process is one rank of a launched tcp job
  BackendFlags flags;
};

// Registers the subcommand and its options on `app`.
CLI::App* add_bench_command(CLI::App& app, BenchCommand& cmd);

// Runs it: process backends (tcp, mpi, torch:*) as a job whose ranks each
// time their own ops, in-process backends here.
// Returns collie's exit code (0 ok, 1 a rank failed or a result was wrong,
// 2 bad usage).
int run_bench_command(BenchCommand& cmd);

// "8", "64K", "1M", "2G" (powers of 1024); throws Error(kUsage) otherwise.
std::uint64_t parse_size(const std::string& text);

// Runs the benchmark on every rank of an in-process backend (the simulator
// by default) and returns rank 0's rows, each also given to `on_row` as it
// is measured; throws Error when a rank fails.
std::vector<BenchRow> bench_in_process(const BenchOptions& o, const std::string& backend, int nranks,
                                       std::uint64_t seed, const sim::NetworkModel& network,
                                       std::uint64_t* events = nullptr, const RowSink& on_row = {});

}  // namespace collie::tools
