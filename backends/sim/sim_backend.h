// The "sim" backend: collie's core over the deterministic simulated network
// (sim/simulator.h) -- virtual time, the alpha-beta-gamma cost model, the
// simulator's faults, one seed -- as the registry lists it
// (backends/builtin_backends.cpp).
#pragma once

#include "backends/backend_info.h"

namespace collie::sim {

BackendInfo make_sim_backend();

}  // namespace collie::sim
