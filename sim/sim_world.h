// SimWorld: a whole job on the simulator -- a LocalWorld over one
// Simulator's endpoints. run() adds the simulator's trace hash, event and
// frame counts to the result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/local_world.h"
#include "sim/network_model.h"
#include "sim/simulator.h"

namespace collie::sim {

struct SimOptions {
  std::uint64_t seed = 1;
  NetworkModel network;
  // Forces one algorithm for every collective that has it (kAuto: choose).
  Algorithm force_algorithm = Algorithm::kAuto;
  AlgorithmSelection selection;
  FaultPlan faults;              // injected deterministically
  Nanos default_timeout_ns = 0;  // every op's timeout (0: none)
  bool trace = false;            // record a Chrome trace (simulator().trace())
  std::string replay;            // the command reports end with
  // Set: the ranks' memory is deferred (Simulator::defer_memory): tensors
  // are device views (MemorySpace::kDevice) that host code leaves alone
  // until run() returns, which synchronizes memory.
  std::optional<DeferredMemoryOptions> deferred_memory;
};

// What the simulator broke, in the form deadlock diagnosis reads.
std::vector<InjectedFault> injected_faults(const Simulator& sim);

using SimResult = RunResult;
using collie::RankOutcome;
using collie::RankProgram;

// The communicator options a simulated world uses (the eager threshold is
// the network model's buffering threshold).
CommunicatorOptions communicator_options(const SimOptions& options);

class SimWorld {
 public:
  SimWorld(int world_size, SimOptions options = {});
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  int world_size() const { return world_->world_size(); }
  Communicator& comm(int rank) { return world_->comm(rank); }
  Simulator& simulator() { return *sim_; }
  const SimOptions& options() const { return opts_; }
  LocalWorld& world() { return *world_; }

  // Runs `program` on every rank (SPMD); see LocalWorld::run.
  SimResult run(const RankProgram& program);

 private:
  SimOptions opts_;
  std::unique_ptr<Simulator> sim_;
  std::unique_ptr<LocalWorld> world_;
};

}  // namespace collie::sim
