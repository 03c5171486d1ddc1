// The conformance suite's decided cases: classes of input that libraries
// implement separately and random cases reach rarely or never, each covered
// by construction rather than drawn from a seed (so their names are stable
// and a seed cannot miss them):
//
//   unsorted_groups    every collective in a group named out of order
//                      ({5,1,4,2} of 6), rooted ones at root 4 -- neither 0
//                      nor the group's first member; gather and all_gather
//                      order by group rank there
//   async_forms        the same calls in their async form (async_op=True,
//                      the library's nonblocking call), and on the whole
//                      world of five
//   sizes              every collective with 65539 elements per rank (or
//                      per block): above 64 Ki, not a power of two, on
//                      three ranks; on groups of five and six of seven, the
//                      world of seven, the world of eight and nine of
//                      eleven, 1,001 elements; 3 elements on five of seven;
//                      4,096 and 65,536 (powers of two) on three; each
//                      blocking with a middle root, then async
//   layouts            every collective with two-dimensional tensors, and
//                      with non-contiguous views of them (every other
//                      element of wider rows; the first half of wider
//                      rows, whose last stride is 1); the
//                      ones that take a tensor or a list, with 0-d scalars
//   uneven_all_to_all  both all_to_all forms with input and output splits
//                      that differ (empty blocks among them), 1-D and 2-D;
//                      with a member that sends nothing, and one that
//                      receives nothing
//   reduce_edges       each reducing op with every contributor negative
//                      (MIN/MAX), NaNs, PRODUCT's precision (float32 and
//                      float64 rounding, int64 wrapping) and int8, uint8,
//                      bool, int32 and int64 at their edges under every
//                      reduce op
//   any_source         any-source receives, blocking and async, in a group
//                      named out of order, empty and 40 B to 512 KiB, int64
//                      and float64: the sender's global rank
//   tags               tags across their range, differing in high bits
//                      only, from a named source and from any source
//   p2p_in_groups      send/recv by global rank around a group named out of
//                      order, blocking and async, small and large
//   call_timeout       a call's own timeout (all_reduce, barrier,
//                      broadcast), honoured at its own deadline; a group's
//                      own timeout, on a receive and on an all_reduce
//   barrier_entry      no member leaves a barrier (or monitored_barrier)
//                      before the late member entered: on 3 to 10 members,
//                      sorted or not, blocking and async, right after
//                      another barrier and right after p2p on its group
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "conformance/collective_check.h"

namespace collie::conformance {

struct DecidedCase {
  std::string feature;
  std::string name;
  int world = 1;
  // Collective calls, run together by run_and_check() ...
  std::vector<CollectiveCase> cases;
  // ... or a targeted check (targeted_checks.h) instead; `library`: the
  // implementation runs in processes of its own (waits sized for them).
  std::function<CaseOutcome(const RunOnEveryRank& run, const std::string& context, bool library)> check;
  ViewLayout views = ViewLayout::kContiguous;  // how the library gets the tensors (JobOptions::views)
  bool needs_timeouts = false;  // skipped on a backend without operation timeouts
  // A library that refuses one of its calls leaves a peer waiting: on a
  // process backend it runs under the suite's hang window, not its timeout.
  bool may_hang = false;
  // On a process backend the case ends its job even when the library is
  // right (a library's timeout error leaves its communicator unusable): it
  // runs on a job of its own (lanes.h).
  bool ends_job = false;
};

std::vector<DecidedCase> decided_cases();

// Runs `d` on `run` (a job of d.world ranks) and judges it: `strict` as
// run_and_check() takes it; `library`: the implementation picks its own
// algorithms.
CaseOutcome run_decided(const DecidedCase& d, const RunOnEveryRank& run, bool strict, bool library);

}  // namespace collie::conformance
