// --record: the ops a program issued, written as a scenario file
// (docs/scenarios.md) that `collie run FILE` replays with the same verdict.
//
// Each rank gets its own program (`programs:`) holding, in the order it
// made them, its new_group calls, its ops (async ones with a handle; each
// op followed by a comment naming the program's file:line) and its waits.
// Every op's operands are tensors of their own, named after the rank and
// the op (r1_op3, r1_op3_list, ...), one-dimensional, of the dtype and
// element count the program passed. An operand the op reads holds the
// values the program passed when they are few (up to kMaxLiteralValues
// elements, or kMaxLiteralListValues in a list: `values`, or an exact
// expression of the entry and element); larger ones get a fixed pattern of
// small integers (exact in every dtype), said in a comment. The run's seed,
// faults and timeout are kept, so the simulator makes the same choices; a
// backend other than the simulator is named (`backend:`), so that the
// replay runs where the program ran. What the replay needs on its command
// line -- a plugin's --backend-plugin, a process backend's --fault
// crash/stall, judged as the program's run judged them (by what the
// survivors did) -- is named in the header.
// The scenario expects the run to end ok, as the program did: a recorded
// failure fails again until the program's ops change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/executor.h"
#include "script/script_rank.h"

namespace collie::script {

inline constexpr std::size_t kMaxLiteralValues = 1024;
inline constexpr std::size_t kMaxLiteralListValues = 48;

struct RecordInput {
  std::string command;                       // the program, as the user gave it
  std::string verdict;                       // "FAIL (deadlock)", for the header comment
  int world = 1;
  std::uint64_t seed = 1;
  std::string backend = "sim";
  std::vector<std::string> faults;           // parse_fault() texts
  std::vector<std::string> replay_flags;     // what the replay needs: --backend-plugin P, --fault crash:...
  Nanos timeout_ns = 0;
  std::vector<const std::vector<KeptCall>*> ranks;  // by rank
};

// The scenario, as YAML text.
std::string record_scenario(const RecordInput& in);

}  // namespace collie::script
