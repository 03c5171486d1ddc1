// LocalWorld: a whole job in one process -- one Communicator per rank over a
// set of transports that share one executor -- and the driver that runs a
// rank program on every rank. The simulator, the in-process test backends
// and plugins all run scenarios and conformance checks through it.
//
// Requires of the transports: transport(r).rank() == r; all of them are
// driven by any one's run_until() (one executor, one thread), which throws
// Error(kDeadlock) when nothing can make progress.
//
// A rank program is a coroutine taking the rank's Communicator; it blocks by
// co_await-ing Works. run() starts every rank and returns when every rank
// finished, or when nothing can move any more (a deadlock, reported per
// blocked rank with its pending ops, unreceived messages and mismatched
// collectives). It never hangs on a transport that honours the contract.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/diagnosis.h"
#include "core/task.h"

namespace collie {

struct RankOutcome {
  bool finished = false;       // the program returned or threw
  std::exception_ptr error;    // what it threw, if anything
  Nanos end_time = 0;          // the transport's clock when it finished
  bool crashed = false;        // the backend crashed it on purpose (fault injection);
                               // whatever it did after the crash is void
  std::string fate;            // a process job: how the rank's process ended, when it
                               // ended abnormally ("killed by signal 9 (Killed)")
};

struct RunResult {
  std::vector<RankOutcome> ranks;
  Nanos end_time = 0;            // the latest rank end time
  Nanos stopped_at = 0;          // the executor's clock when the run stopped
  std::uint64_t trace_hash = 0;  // filled in by simulated worlds
  std::uint64_t events = 0;
  std::uint64_t frames = 0;      // frames delivered to the ranks during the run (0: not counted)
  bool deadlocked = false;
  // A real job stopped making progress for the timeout (it has no global
  // view to diagnose a deadlock with): blocked_ranks and deadlock_report
  // say which ranks were stuck in which op. deadlocked is set too.
  bool stalled = false;
  std::vector<int> blocked_ranks;  // ranks that never finished, when deadlocked
  std::string deadlock_report;     // the diagnosis (core/diagnosis.h), ending with the replay command
  std::string deadlock_dot;        // the wait-for graph as Graphviz
  std::vector<std::string> causes; // the diagnosis's root causes
  // The transport broke its contract so that the run could not finish
  // (core/executor.h: run_until returned before every rank finished,
  // without reporting a deadlock). Never a pass, whatever the scenario
  // expects; deadlock_report then says what each unfinished rank waited for.
  std::string transport_fault;

  bool ok() const;               // every rank finished without an error
  // The transport's fault, the rank error that ended first (by end_time;
  // ties, the lowest rank) as text, or the deadlock
  // report, or the ranks that never finished, or "ok".
  std::string describe() const;
};

using RankProgram = std::function<Task<void>(Communicator&)>;

// Runs `program` on one rank as a background coroutine: it starts inside
// the rank's executor (in its order), and records how it ended in `out`
// and counts itself in `finished`. What every driver of a job spawns.
Spawned run_rank(const std::function<Task<void>(Dist&)>& program, Dist& dist, RankOutcome& out, std::size_t& finished);

// What a run's reports need from whoever drives it.
struct RunContext {
  std::string label;   // "seed 7", shown in reports
  std::string replay;  // the command that replays the run, ending every report
  // What the backend broke on purpose (lost frames, crashes), for diagnosis.
  std::function<std::vector<InjectedFault>()> faults;
  std::function<bool(int)> crashed;  // whether a rank crashed
};

class LocalWorld {
 public:
  // `transports[r]` serves rank r and outlives this object.
  LocalWorld(std::vector<Transport*> transports, CommunicatorOptions options);
  ~LocalWorld();
  LocalWorld(const LocalWorld&) = delete;
  LocalWorld& operator=(const LocalWorld&) = delete;

  int world_size() const { return static_cast<int>(comms_.size()); }
  Communicator& comm(int rank) { return *comms_[static_cast<std::size_t>(rank)]; }

  // Runs `program` on every rank (SPMD) to completion or deadlock. May be
  // called more than once. `program` must outlive the call. `context` is
  // printed in deadlock reports (e.g. "seed 7").
  RunResult run(const RankProgram& program, const RunContext& context);
  RunResult run(const RankProgram& program, const std::string& label = "") {
    return run(program, RunContext{label, "", nullptr, nullptr});
  }

 private:
  std::string diagnose_collective_mismatch() const;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<SpawnRegistry> programs_;
};

}  // namespace collie
