// What a simulated backend is told beyond BackendOptions: the network it
// simulates, the faults it injects and who makes its scheduling choices.
// Kept out of the plugin interface (backends/backend.h names it only).
#pragma once

#include "sim/explorer.h"
#include "sim/faults.h"
#include "sim/network_model.h"

namespace collie::sim {

struct SimulationOptions {
  NetworkModel network;
  FaultPlan faults;              // injected deterministically from the seed
  Explorer* explorer = nullptr;  // collie explore: the choices instead of the PRNG
};

}  // namespace collie::sim
