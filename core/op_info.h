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
  // The algorithm step the op is in, for reports: a phase name with static
  // storage duration and an optional index (-1: none). step() spells it.
  const char* step_phase = nullptr;
  int step_index = -1;
  std::string step() const;
  // monitored_barrier: a timeout names every member that did not arrive,
  // not only the first.
  bool wait_all_ranks = false;
  // Point-to-point ops only: the peer (global rank; -1 with any_source),
  // tag and buffer.
  bool is_send = false;
  bool any_source = false;
  int peer = -1;
  std::int32_t tag = 0;
  DType dtype = DType::kFloat32;
  std::uint64_t count = 0;

  // One line naming the op: "rank 0: all_reduce(float32 x 4, sum, ring) #3
  // on world" or "rank 1: recv #2 on world from rank 0 (tag 5, float32 x 4)".
  std::string describe() const;
  OpContext context(std::vector<int> peers = {}) const {
    return OpContext{rank, op, group, seq, std::move(peers)};
  }
};

}  // namespace collie
