// `collie bench`: its command-line options and how it runs on each backend.
//
//   collie bench --backend sim -n 1024 --ranks-per-node 8 --op all_reduce
//       every rank in this process on the simulator; times are virtual.
//   collie bench --backend tcp -n 4 --op all_gather
//       four real processes on this host (collie launch), wall time.
//   other in-process backends (plugins) run like sim, in wall time.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sim/network_model.h"
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
  bool as_rank = false;  // internal: this process is one rank of a launched tcp job
  std::vector<std::string> plugins;
};

// Registers the subcommand and its options on `app`.
CLI::App* add_bench_command(CLI::App& app, BenchCommand& cmd);

// Runs it; `argv` is the collie command line (relaunched for tcp ranks).
// Returns collie's exit code (0 ok, 1 a rank failed or a result was wrong,
// 2 bad usage).
int run_bench_command(BenchCommand& cmd, int argc, char** argv);

// "8", "64K", "1M", "2G" (powers of 1024); throws Error(kUsage) otherwise.
std::uint64_t parse_size(const std::string& text);

}  // namespace collie::tools
