// The rank side of the op protocol (op_protocol.h) for workers written in
// C++: `collie worker` (collie's core over TCP) and the MPI worker. A worker
// joins the job, then executes its controller's commands on a Dist -- the
// implementation under test -- in order, until told to end.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dist.h"

namespace collie::remote {

struct WorkerHooks {
  // A run begins ({"t":"begin"}): the last run's groups are being dropped.
  std::function<void()> begin_run;

  // A library whose ranks must share a secret before they can talk (NCCL's
  // unique id): rank 0's `bootstrap()` rides in its hello; once every rank
  // has joined, the controller hands it to every rank, whose `joined(text)`
  // runs before the first command (the communicator's collective set-up).
  // Both empty: no bootstrap.
  std::function<std::string()> bootstrap;
  std::function<void(const std::string& bootstrap)> joined;

  // Runs collie bench's timed loop on this rank ({"t":"bench"}); returns
  // the rows (rank 0) as JSON. Empty: bench is refused.
  std::function<nlohmann::json(Dist& dist, const nlohmann::json& options)> bench;

  // Why this worker cannot hand its library non-contiguous views (a run
  // that asks for them, {"views":"strided"} or "pitched", then fails each op as
  // unsupported with these words). Empty: the request is ignored, as by
  // collie's core, whose views are contiguous by contract.
  std::string no_strided_views;

  // A run over the whole job runs its world ops on the library's own
  // default group (dist.world(): MPI_COMM_WORLD) instead of a group made
  // for the run -- a library wrong on its default communicator only is
  // then seen. For a Dist without op timeouts (a run's timeout would need a
  // group of its own). False: every run makes its world group.
  bool world_is_the_default_group = false;

  // One step of a program polling a handle instead of waiting for it: the
  // library advances without blocking (LibraryExecutor::poll: MPI_Test on
  // each request, cudaEventQuery) and `done()` is returned. An async op
  // sent with "poll_ns" is polled so before it is waited for, and fails when
  // it completed only inside wait(). Empty: such an op is waited for at
  // once (collie's core over TCP: its Works complete as frames arrive).
  std::function<bool(const std::function<bool()>& done)> poll;
};

// Connects to COLLIE_CONTROLLER, proves COLLIE_JOB_TOKEN as rank
// dist.rank() and says that `library` runs the ops, then serves commands.
// An op whose implementation wrote into a buffer it only reads (a send's, a
// collective's input, any buffer of a rank outside the group), into a
// buffer of an op completed earlier in the run, or past the end of any of
// its buffers (each handed over with a guard pattern in the bytes after
// it), is answered as failed with a sentence saying so: the controller sees
// only the outputs. Once an op completed, the buffers it only read are
// overwritten with a pattern: a library still reading one delivers that.
// While it serves, a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT)
// is first told to the controller ({"t":"crashed","signal":N}), then
// handled as before (the library's handler, or the default).
// Returns the process exit code: 0 after "end", 1 when the controller went
// away or spoke nonsense (said on stderr).
int serve_ops(Dist& dist, const std::string& library, const WorkerHooks& hooks = {});

}  // namespace collie::remote
