// Lanes: the cases of a suite run side by side, each lane a thread with a
// job of its own (JobCache keeps one per thread). On a process backend most
// of a case's wall time is waiting -- for a job to start, for a library to
// time out or be declared hung -- and a lane that waits leaves the CPU to
// the others.
//
// Cases expected to break their job (a hang or a library error ends it)
// go to lanes 1.. first, each soon on a fresh job, while lane 0 runs the
// rest in order on one kept job; a lane whose breaking cases are done
// takes the rest too. Results go where each case's index says, so the
// report's order does not depend on timing.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace collie::conformance {

struct LaneCase {
  std::size_t index;   // passed back to run
  bool breaks = false; // expected to leave its job broken
};

// Runs run(index) for every case on `lanes` threads (1: on this thread, in
// order). A run returning false stops the lanes from taking more cases; an
// exception stops them too and is rethrown here. Each lane calls end_lane()
// on its thread when it has no more cases.
void run_in_lanes(const std::vector<LaneCase>& cases, int lanes, const std::function<bool(std::size_t)>& run,
                  const std::function<void()>& end_lane);

}  // namespace collie::conformance
