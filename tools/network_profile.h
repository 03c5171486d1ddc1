// The network profile file `collie calibrate` writes: what it measured and
// the simulator's model fitted to it, as YAML that scenario/loader.h's
// load_profile() reads back (scenarios use it with network: {profile: FILE}).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/network_model.h"

namespace collie::tools {

// `exchange_us`: (bytes, microseconds) of one exchange between 2 ranks;
// `measured_on`: the host and time, for the header comment.
std::string network_profile_yaml(const sim::NetworkModel& m,
                                 const std::vector<std::pair<std::uint64_t, double>>& exchange_us,
                                 const std::string& backend, const std::string& measured_on);

}  // namespace collie::tools
