// The checks every run gets: each collective call against the reference
// oracle (check/reference.h), each receive against the matching send.
//
// A finding is a violation of torch.distributed's documented semantics (a
// wrong value, a receive without a send), or a difference where torch leaves
// the behaviour unspecified and collie's core makes the stricter choice (the
// tensors of reduce's non-destination ranks; bitwise-identical all_reduce
// results on every rank). Whoever judges the run decides what an
// unspecified difference costs: a failure for collie's own core, a note for
// other implementations unless --strict (docs/semantics.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "check/op_records.h"

namespace collie::check {

struct Finding {
  enum class Kind { kViolation, kUnspecified } kind = Kind::kViolation;
  std::string text;
};

// Compares every collective that every member issued and completed with
// the oracle; appends what differs. Returns how many calls were compared.
int check_collectives(const OpRecords& records, std::vector<Finding>& findings);

// Ranks whose process was killed on purpose before one of their ops (a
// crash fault): by global rank, the op id (OpInfo::id) of the first op the
// rank never issued. Its records from that op on are of calls the
// implementation never saw -- recorded as the rank's program made them,
// just before the kill -- so nothing in them was sent or contributed.
using NeverIssued = std::map<int, std::uint64_t>;

// The k-th receive (in posting order) that matched src on (group, tag) must
// hold the k-th message src sent there (non-overtaking); a message of a
// send `never_issued` voids does not exist. Returns how many receives were
// compared.
int check_p2p(const OpRecords& records, std::vector<Finding>& findings, const NeverIssued& never_issued = {});

// A collective that a crashed member never called cannot have completed on
// another member whose result needs that member's part: every member of a
// barrier, all_reduce, all_gather or reduce_scatter, every receiver of a
// broadcast or scatter from it, the root of a reduce or gather, a rank
// expecting an all_to_all block from it (empty parts need nothing). Each
// such completion is a violation. Returns how many calls were examined.
int check_calls_never_made(const OpRecords& records, const NeverIssued& never_issued,
                           std::vector<Finding>& findings);

// The buffers ops changed that they must not (OpRecords::buffer_findings),
// as violations. Returns how many it found.
int check_buffers(const OpRecords& records, std::vector<Finding>& findings);

}  // namespace collie::check
