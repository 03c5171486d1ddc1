// SimWorld: a whole job on the simulator -- one Communicator per rank over
// one Simulator -- and the driver that runs a rank program on every rank.
//
// A rank program is a coroutine taking the rank's Communicator; it blocks by
// co_await-ing Works. run() starts every rank at virtual time 0 and returns
// when every rank finished, or when nothing can move any more (a deadlock,
// reported per blocked rank). It never hangs: virtual time only advances
// through events, and an empty queue ends the run.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/task.h"
#include "sim/network_model.h"
#include "sim/simulator.h"

namespace collie::sim {

struct SimOptions {
  std::uint64_t seed = 1;
  NetworkModel network;
  // Forces one algorithm for every collective that has it (kAuto: choose).
  Algorithm force_algorithm = Algorithm::kAuto;
  AlgorithmSelection selection;
};

struct RankOutcome {
  bool finished = false;       // the program returned or threw
  std::exception_ptr error;    // what it threw, if anything
  Nanos end_time = 0;          // virtual time at which it finished
};

struct SimResult {
  std::vector<RankOutcome> ranks;
  Nanos end_time = 0;            // the latest rank end time
  std::uint64_t trace_hash = 0;
  std::uint64_t events = 0;
  std::uint64_t frames = 0;
  bool deadlocked = false;
  std::string deadlock_report;   // per blocked rank: its pending ops; unreceived messages

  bool ok() const;               // every rank finished without an error
  // The first rank error as text, or the deadlock report, or "ok".
  std::string describe() const;
};

using RankProgram = std::function<Task<void>(Communicator&)>;

class SimWorld {
 public:
  SimWorld(int world_size, SimOptions options = {});
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  int world_size() const { return static_cast<int>(comms_.size()); }
  Communicator& comm(int rank) { return *comms_[static_cast<std::size_t>(rank)]; }
  Simulator& simulator() { return *sim_; }
  const SimOptions& options() const { return opts_; }

  // Runs `program` on every rank (SPMD) to completion or deadlock. May be
  // called more than once; later runs continue the same virtual clock.
  // `program` must outlive the call.
  SimResult run(const RankProgram& program);

 private:
  std::string diagnose_collective_mismatch() const;
  SimOptions opts_;
  std::unique_ptr<Simulator> sim_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<SpawnRegistry> programs_;
};

}  // namespace collie::sim
