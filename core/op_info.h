// OpInfo: who an op is -- rank, op name, group, sequence number, the call's
// fingerprint and the algorithm step it is in -- for errors, reports,
// traces and faults that target ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/frame.h"
#include "core/transport.h"

namespace collie {

// Shared by the sub-messages of one collective.
struct OpInfo {
  int rank = -1;          // global rank running the op
  std::string op;         // "send", "all_reduce", ...
  std::string group;      // group name
  std::int64_t seq = -1;  // sequence number in the group
  Fingerprint fp;         // collectives only
  Nanos started_at = 0;
  std::uint64_t id = 0;   // unique per rank, in issue order (1-based)
  std::string step;       // the algorithm step the op is in, for reports
  OpContext context(std::vector<int> peers = {}) const {
    return OpContext{rank, op, group, seq, std::move(peers)};
  }
};

}  // namespace collie
