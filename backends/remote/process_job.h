// Process jobs: one process per rank, started by the backend (directly, or
// through a launcher such as mpirun), each executing its rank's ops with the
// library under test at the command of this process -- the controller --
// over the op protocol (op_protocol.h). Every rank's program runs here, on
// one thread, as a coroutine over a Dist whose ops are forwarded to its
// process; their inputs, outputs and errors come back and are checked here.
//
// A job is started once and runs many programs (collie conformance runs
// every case of a world size on one job): each run begins with a group of
// every rank as its world that holds nothing of another run (a fresh one,
// or a clean run's: op_protocol.h's "begin"). A run that leaves the job broken -- a hang, a lost process, an
// op still executing, a library error -- makes it unusable (reusable()
// false); the job is then torn down and the next run starts a new one.
//
// Never hangs: a run in which no process answered for the timeout while
// some rank waits is a hang, reported with each rank's last started op
// (op, group, sequence number, peer) and how long ago it started; a
// process that dies fails its rank's ops with its exit status or signal.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/job.h"
#include "backends/remote/child_processes.h"

namespace collie::remote {

struct ProcessJobSpec {
  std::string backend;  // the --backend name, for messages
  // The processes that start a job of `world` ranks whose workers connect
  // to `controller` ("host:port") and prove `token`.
  std::function<std::vector<ChildSpec>(int world, const std::string& controller, const std::string& token)> children;
  // Child i is rank i (its exit status is the rank's fate); else the
  // children are launchers (mpirun) and ranks are known by their hello.
  bool child_per_rank = true;
  std::string listen_host = "127.0.0.1";
  Nanos start_timeout_ns = 120'000'000'000;  // every rank joins within this
  // The library fails an op that outlives its timeout (torch's backends,
  // collie's core): a run is declared hung a margin after the timeout, so
  // that the library's own error comes first. Without (MPI), at the timeout
  // -- unless a rank's process was lost, which its launcher answers.
  bool library_timeouts = true;
  // Its workers run a run of world w below the job's on ranks 0..w-1 while
  // the others idle (no rank outside a group takes part in making it: MPI's
  // communicators, collie's groups; torch's new_group needs every rank).
  bool serves_smaller_worlds = false;
  // Turns a launch that failed (a child's exit status and last output) into
  // advice, or "" ("mpirun refuses to run as root: ...").
  std::function<std::string(const std::string& output)> explain_failed_start;
  // A process that proved the job's token but said its world has
  // `world_said` ranks, not the job's -- a worker the launcher started
  // alone, as an MPI worker under another MPI's mpirun starts -- ends the
  // start with this advice (given what the worker said runs its ops,
  // `library`); empty: the fact alone.
  std::function<std::string(int world_said, const std::string& library)> explain_wrong_world;
  // What a report of a rank whose process died quotes of the output of its
  // process (or of the launcher, which carries every rank's): the lines
  // that say why. Null: last_lines(output, 6).
  std::function<std::vector<std::string>(const std::string& output)> last_words;
  // Removes what the children of the job started with `token` may have left
  // outside their processes (a file they met through), once the job has
  // ended or failed to start. Null: nothing to remove.
  std::function<void(const std::string& token)> clean_up;
};

// Whether a line of a process's output says something: not blank, not a
// frame of a backtrace ("libmpich.so.12(+0x30c7c5) [0x7fe467d0c7c5]").
bool says_something(const std::string& line);

// The last `n` lines of `output` that say something and are not `noise`.
std::vector<std::string> last_lines(const std::string& output, int n,
                                    const std::function<bool(const std::string& line)>& noise = {});

// The environment of rank `rank` of a job of `world` local processes: torch's
// env:// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT) and the controller's (COLLIE_CONTROLLER,
// COLLIE_JOB_TOKEN).
std::vector<std::pair<std::string, std::string>> local_rank_env(int rank, int world, const std::string& master_port,
                                                                const std::string& controller, const std::string& token);

// Starts the processes and waits until every rank has joined. Throws
// Error(kUsage) naming why a job cannot start: a program that is missing or
// exits at once (with its last line of output), a launcher that refuses,
// ranks that never join.
std::unique_ptr<Job> start_process_job(const ProcessJobSpec& spec, const JobOptions& options);

}  // namespace collie::remote
