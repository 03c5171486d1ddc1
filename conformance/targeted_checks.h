// Targeted checks: properties of an implementation that random traffic
// reaches rarely or never, each a program of its own run on every rank of a
// job through the op-level seam (so on any implementation), judged here.
// The conformance suite runs them as decided cases (decided_cases.h).
#pragma once

#include <string>
#include <vector>

#include "conformance/collective_check.h"

namespace collie::conformance {

// Any-source receives in a group created from `named` (any order): every
// member but `receiver` sends it `per_sender` messages of `count` int64
// elements on one tag; the receiver receives them all from any source --
// one blocking recv() at a time, or every irecv() posted at once then
// waited for (`async`). Each receive must report its sender's global rank
// (torch's recv returns it; a group rank is named as such), every message
// must arrive exactly once and intact, and one sender's messages in the
// order it sent them.
// int64 elements, or float64 ones (each a quarter above an integer: a
// receive that carries values through an integer loses it).
CaseOutcome run_any_source(const RunOnEveryRank& run, int world, const std::vector<int>& named, int receiver,
                           int per_sender, std::size_t count, bool async, const std::string& context = "",
                           DType dtype = DType::kInt64);

// Empty messages from any source in a group created from `named`: every
// member but `receiver` sends it an empty int64 tensor on a tag of its own
// (100 + its global rank); the receiver receives each from any source on
// that tag -- blocking, or every irecv() at once (`async`) -- and each must
// report its sender's global rank.
CaseOutcome run_empty_sources(const RunOnEveryRank& run, int world, const std::vector<int>& named, int receiver,
                              bool async, const std::string& context = "");

// The tags that run_tag_range() uses: small ones, ones that differ only in
// high bits (1, 1 + 2^16, 1 + 2^24, 1 + 2^30), and the largest (2^31 - 1,
// and 2^30 - 1, which differs from it in bit 30 alone).
std::vector<int> tag_range();

// Tags across their whole range on a pair of a group created from `named`:
// `sender` isends one message per tag_range() tag (the first of 65537
// elements, the rest of a few), all at once; `receiver` receives them in
// the reverse order of tags -- blocking recv() one at a time, or every
// irecv() at once (`async`), from `sender` or from any source -- and each
// must hold the message of its tag and report `sender` as its source.
CaseOutcome run_tag_range(const RunOnEveryRank& run, int world, const std::vector<int>& named, int sender,
                          int receiver, bool async, const std::string& context = "", bool any_source = false);

// Point-to-point around a group created from `named` (any order): each
// member sends `counts[k]` int64 elements to the next member by group rank
// and receives from the one before, for each k in turn -- blocking send()
// and recv() (even group ranks sending first), or isend() and irecv()
// together (`async`) -- naming peers by global rank, as torch does. Each
// must receive exactly what its predecessor sent.
CaseOutcome run_ring(const RunOnEveryRank& run, int world, const std::vector<int>& named,
                     const std::vector<std::size_t>& counts, bool async, const std::string& context = "");

// A barrier right after point-to-point traffic on its group: on a group
// created from `named`, each member isends to the next by group rank and
// irecvs from the one before, waits for both, then enters a barrier --
// blocking, or async and waited for (`async`) -- `late` doing so `late_ns`
// (its executor's clock) after the others. No member may leave the barrier
// before every member entered (counted by the ranks' programs, which all run
// in this process).
CaseOutcome run_barrier_after_p2p(const RunOnEveryRank& run, int world, const std::vector<int>& named, int late,
                                  Nanos late_ns, bool async, const std::string& context = "");

// A group's own timeout on point-to-point: on a group created from `named`
// with the timeout `group_timeout_ns`, `receiver` receives from a member
// that never sends. The receive must fail, not before the group's timeout
// and by `latest_ns` (well before the run's own timeout: a library that
// timed out a group's receives at the default group's timeout passed).
// With `all_reduce`, the receiver calls an all_reduce on the group instead,
// which no other member joins (collectives under the default group's
// timeout, p2p right, passed).
CaseOutcome run_group_timeout(const RunOnEveryRank& run, int world, const std::vector<int>& named, int receiver,
                              Nanos group_timeout_ns, Nanos latest_ns, const std::string& context = "",
                              bool all_reduce = false);

// What run_call_timeout's caller issues: a collective no other member
// joins, or a receive from a member that never sends.
enum class TimedOp {
  kAllReduce,
  kBarrier,
  kBroadcast,        // from a member that never calls
  kRecvAnySource,    // blocking recv from any source
  kIrecv,            // irecv from a named member, then wait
};
std::string timed_op_name(TimedOp op);  // "all_reduce", ..., "recv_any_source", "irecv"

// A call's own timeout: on a group created from `named` with the group
// timeout `group_timeout_ns`, `caller` issues `op` with its own timeout
// `call_timeout_ns` (Work.wait(timeout) in torch); nobody else calls or
// sends. It must fail with an error at its own deadline: not before it, and
// well before the group's (at most halfway from one to the other).
CaseOutcome run_call_timeout(const RunOnEveryRank& run, int world, const std::vector<int>& named, int caller,
                             Nanos group_timeout_ns, Nanos call_timeout_ns, const std::string& context = "",
                             TimedOp op = TimedOp::kAllReduce);

}  // namespace collie::conformance
