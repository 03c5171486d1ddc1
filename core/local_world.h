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
#include "core/task.h"

namespace collie {

struct RankOutcome {
  bool finished = false;       // the program returned or threw
  std::exception_ptr error;    // what it threw, if anything
  Nanos end_time = 0;          // the transport's clock when it finished
};

struct RunResult {
  std::vector<RankOutcome> ranks;
  Nanos end_time = 0;            // the latest rank end time
  std::uint64_t trace_hash = 0;  // filled in by simulated worlds
  std::uint64_t events = 0;
  std::uint64_t frames = 0;
  bool deadlocked = false;
  std::vector<int> blocked_ranks;  // ranks that never finished, when deadlocked
  std::string deadlock_report;     // per blocked rank: pending ops; unreceived messages; mismatches

  bool ok() const;               // every rank finished without an error
  // The first rank error as text, or the deadlock report, or "ok".
  std::string describe() const;
};

using RankProgram = std::function<Task<void>(Communicator&)>;

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
  RunResult run(const RankProgram& program, const std::string& context = "");

 private:
  std::string diagnose_collective_mismatch() const;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<SpawnRegistry> programs_;
};

}  // namespace collie
