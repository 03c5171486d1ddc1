// Jobs: the N ranks of one implementation, each reachable through the
// op-level seam (core/dist.h), started and run as one unit. The scenario
// runner, the conformance suite and `collie bench` drive every backend
// through this interface and nothing else:
//   - in-process backends (the simulator, in-process TCP, transport
//     plugins): collie's core over the backend's transports, all ranks on
//     one executor (backends/in_process_job.h);
//   - process backends (TCP as processes, Open MPI, torch.distributed):
//     one process per rank, started by the backend's launcher, each rank's
//     ops executed in its process at the controller's command and their
//     inputs, outputs and errors streamed back (backends/remote/).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/view_layout.h"
#include "core/dist.h"
#include "core/local_world.h"
#include "core/task.h"

namespace collie {

// A fault done to a rank's process (process backends): SIGKILL just before
// the rank issues its op #before_op of a run (crash), or SIGSTOP there and
// SIGCONT `stall_ms` later (stall). Given as --fault crash:rank=R,op=K and
// --fault stall:rank=R,op=K,ms=T.
struct ProcessFault {
  enum class Kind { kCrash, kStall } kind = Kind::kCrash;
  int rank = 0;
  std::uint64_t before_op = 1;  // 1-based, counting every op the rank issues in the run
  std::int64_t stall_ms = 0;
  std::string text;             // as the user wrote it
};

// Parses --fault crash:rank=R,op=K or stall:rank=R,op=K,ms=T into `out`;
// returns what is wrong instead.
std::optional<std::string> parse_process_fault(const std::string& text, ProcessFault& out);

struct JobOptions {
  int world_size = 1;
  std::uint64_t seed = 1;
  // Every op's timeout. collie's core fails an op that has not completed
  // after this long with a timeout error; a process job in which no rank
  // has made progress for this long has hung, and is reported and torn
  // down. 0: none for the simulator, 60 s for real backends.
  Nanos timeout_ns = 0;
  // collie's core: sends up to this many bytes complete without the receiver.
  std::size_t eager_threshold_bytes = 64 * 1024;
  bool trace = false;
  bool timing_only = false;
  std::vector<ProcessFault> process_faults;
  const sim::SimulationOptions* simulation = nullptr;  // simulated backends only
  // Process backends: each worker hands the library every tensor as a
  // non-contiguous view holding the same values (ViewLayout); a worker
  // whose adapter cannot fails each op as unsupported, saying so. collie's
  // core ignores it: its views are contiguous by contract (core/tensor.h).
  ViewLayout views = ViewLayout::kContiguous;
  // Keep a record of each rank's ops in flight that another thread may read
  // while run() is stuck (Job::in_flight_report; the conformance watchdog).
  bool track_in_flight = false;
  // collie's core: checking runs overwrite a completed send's buffer until
  // its rank runs again (CommunicatorOptions::scribble_completed_sends).
  bool scribble_completed_sends = false;
  // collie's core: the first send's id (CommunicatorOptions::first_send_id).
  std::uint64_t first_send_id = 1;
  // Process jobs: once an op of a run failed, the run has stalled when no
  // rank made progress for this long, not the timeout's margin after it (a
  // run that expects no error is decided by then, and its other ranks may
  // wait the whole op timeout for the rank that gave up). 0: as any run.
  Nanos stall_after_failure_ns = 0;
};

// A rank's part of a job's program.
using DistProgram = std::function<Task<void>(Dist&)>;

class Job {
 public:
  virtual ~Job() = default;

  virtual int world_size() const = 0;

  // Runs `program` on every rank until every rank finished, the job
  // deadlocked (collie's core: diagnosed, RunResult::deadlocked) or stopped
  // making progress for the timeout (a process job: RunResult::stalled,
  // with each rank's last started op). Never hangs. `context` supplies the
  // label and replay command of reports.
  virtual RunResult run(const DistProgram& program, const RunContext& context) = 0;

  // The timeout and process faults of the runs that follow (a kept job
  // takes each run's own; the rest of `options` must match the job's).
  virtual void set_run_options(const JobOptions& options) { (void)options; }

  // Whether another run() may follow: a process job stays up between the
  // cases of `collie conformance` until a run leaves it broken.
  virtual bool reusable() const { return false; }

  // Whether its runs may be of `world` ranks (set_run_options' world_size):
  // its own size, or -- a process job whose workers allow it -- fewer, on
  // its first ranks while the others idle.
  virtual bool can_run_world(int world) const { return world == world_size(); }

  // Process jobs: runs collie bench's timed loop (tools/bench.h) in every
  // rank's own process -- no round trip to this process per op -- with
  // `options_json`, and returns rank 0's rows as JSON text. Others throw
  // Error(kUsage).
  virtual std::string bench_in_ranks(const std::string& options_json);

  // What ran the ops, for reports ("collie core over sim", "Open MPI 4.1.4").
  virtual std::string implementation() const = 0;

  // With JobOptions::track_in_flight: each rank's ops in flight (op, group,
  // sequence number, algorithm step, start time), one line per rank. Safe
  // to call from another thread while run() is stuck in the transport --
  // the only report there is of a case the watchdog abandoned. Empty when
  // not tracked.
  virtual std::string in_flight_report() const { return {}; }

  // Facts of the last run.
  virtual std::uint64_t trace_hash() const { return 0; }
  virtual std::uint64_t events() const { return 0; }
  virtual std::vector<InjectedFault> injected_faults() const { return {}; }
  virtual bool write_trace(std::ostream& out, Nanos end) const { (void)out; (void)end; return false; }
};

}  // namespace collie
