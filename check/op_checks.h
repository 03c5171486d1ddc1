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

// The k-th receive (in posting order) that matched src on (group, tag) must
// hold the k-th message src sent there (non-overtaking). Returns how many
// receives were compared.
int check_p2p(const OpRecords& records, std::vector<Finding>& findings);

// The buffers ops changed that they must not (OpRecords::buffer_findings),
// as violations. Returns how many it found.
int check_buffers(const OpRecords& records, std::vector<Finding>& findings);

}  // namespace collie::check
