// collie bench: the time of one op over a range of message sizes, printed
// as nccl-tests prints it (size, count, type, redop, root, time, algbw,
// busbw, #wrong).
//
// One rank program (bench_rank) runs on every backend: on the simulator it
// measures virtual time, on real backends wall time. Per size it runs
// `warmup` untimed iterations, a barrier, then `iters` timed ones back to
// back; the reported time is the slowest rank's mean. After timing, one more
// iteration with known inputs is checked element by element (#wrong).
//
//   algbw = bytes / time
//   busbw = algbw * factor, the factor of nccl-tests' PERFORMANCE.md:
//     all_reduce 2(n-1)/n; all_gather, scatter, gather, reduce_scatter,
//     all_to_all (n-1)/n; broadcast, reduce, sendrecv 1; barrier 0.
// `bytes` is the whole buffer, as in nccl-tests: for all_gather, scatter and
// gather the n-chunk list, for reduce_scatter the input and for all_to_all
// each side (each rank's chunk is bytes/n). reduce_scatter and all_to_all
// run as reduce_scatter_tensor and all_to_all_single.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/algorithm.h"
#include "core/dist.h"
#include "core/dtype.h"
#include "core/op.h"
#include "core/reduce_op.h"
#include "core/task.h"

namespace collie::tools {

struct BenchOptions {
  // all_reduce, broadcast, reduce, all_gather, scatter, gather,
  // reduce_scatter, all_to_all, barrier, sendrecv (each rank sends to
  // rank+1 and receives from rank-1).
  std::string op = "all_reduce";
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 64ull << 20;
  double step_factor = 2;  // sizes: min, min*f, ... up to max
  std::vector<std::uint64_t> sizes;  // when not empty: exactly these sizes, instead of min/max/factor
  int iters = 0;           // timed iterations per size; 0: by size (1000 for small, 5 for 64 MiB+)
  int warmup_iters = 5;    // untimed iterations per size
  DType dtype = DType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  int root = 0;
  bool check = true;  // verify one iteration's results per size
  // Time with the host's steady clock instead of the executor's now(): for
  // backends whose clock counts events, not time (BackendInfo::logical_clock).
  bool wall_clock = false;
};

struct BenchRow {
  std::uint64_t bytes = 0;   // whole buffer, as nccl-tests counts it
  std::uint64_t count = 0;   // elements of that buffer
  int iters = 0;
  double time_us = 0;        // slowest rank's mean per iteration
  double algbw_GBps = 0;     // 10^9 bytes per second
  double busbw_GBps = 0;
  std::int64_t wrong = -1;   // elements that differ from the expected result (-1: not checked)
};

// Throws Error(kUsage) naming the problem (unknown op, a reduce op the dtype
// does not take, a root outside the world, sizes out of order).
void validate(const BenchOptions& o, int world_size);

// The sizes in bytes a table's rows ask for (--sizes, or min to max by the
// step factor; one row of 0 for an op that moves no data), and how many
// elements one of them holds for `kind` on n ranks (whole elements, whole
// chunks of n for ops that cut their tensor into n): a row of 0 elements is
// skipped.
std::vector<std::uint64_t> bench_sizes(const BenchOptions& o);
std::uint64_t elements_of(OpKind kind, const BenchOptions& o, int n, std::uint64_t bytes);

// The bytes of the buffers every rank of a world of n holds together at the
// table's largest row (each rank's operands, and one chunk for the check's
// known inputs): what collie bench weighs against the memory guard
// (core/memory_guard.h) before it allocates anything. The backend's own
// buffers (messages in flight, an algorithm's scratch) come on top.
double bench_memory_bytes(const BenchOptions& o, int world_size);

// nccl-tests' bus-bandwidth factor for `op` at `n` ranks.
double bus_factor(std::string_view op, int n);

// Receives each row as rank 0 measures it.
using RowSink = std::function<void(const BenchRow&)>;

// Runs the benchmark on this rank; every rank of the world must call it with
// the same options. On rank 0, `on_row` receives each row as soon as it is
// measured, one per size (it may be empty).
Task<void> bench_rank(Dist& c, const BenchOptions& o, RowSink on_row);

// Runs bench_rank on `dist`'s rank to completion, with options as JSON
// (bench_options_to_json); returns rank 0's rows as JSON (others: []).
// What a process job's worker does for {"t":"bench"}.
nlohmann::json bench_in_this_rank(Dist& dist, const nlohmann::json& options);
nlohmann::json bench_options_to_json(const BenchOptions& o);
BenchOptions bench_options_from_json(const nlohmann::json& j);

// Rows as JSON ([{bytes, count, iters, time_us, algbw_GBps, busbw_GBps,
// wrong}, ...]) and back.
std::string rows_to_json(const std::vector<BenchRow>& rows);
std::vector<BenchRow> rows_from_json(const std::string& text);

// The nccl-tests-style table, printed as nccl-tests prints it: the header
// at once, each row as it is measured (flushed, so that a long run shows
// its progress), and at the end the out-of-bounds count and the average
// bus bandwidth. `what` is the header's description of the backend and world.
class BenchTable {
 public:
  BenchTable(std::ostream& out, const BenchOptions& o, int world_size, const std::string& what);  // the header
  void row(const BenchRow& r);
  void finish();  // the footer
  const std::vector<BenchRow>& rows() const { return rows_; }

 private:
  std::ostream& out_;
  const BenchOptions& o_;
  std::vector<BenchRow> rows_;
};

}  // namespace collie::tools
