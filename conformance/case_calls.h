// The call every rank makes for a collective case (collective_case.h):
// its buffers -- inputs filled by fill_inputs(), outputs holding a
// sentinel -- and the DistCall over them, built from core/op.h's table: a
// slot the op reads gets inputs, one it only writes gets the sentinel, a
// tensor the oracle sees as blocks is laid out block by block. Ranks
// outside the case's group make the same call over their own buffers (they
// must find them untouched).
#pragma once

#include <vector>

#include "conformance/collective_case.h"
#include "core/group.h"
#include "core/op.h"
#include "core/tensor.h"

namespace collie::conformance {

// What an output buffer holds before an op writes it.
inline constexpr double kSentinel = 77;

struct CaseCall {
  std::vector<Tensor> buffers;  // owned; the call's views point into them
  DistCall call;                // its group is left for the caller (the case's group on this rank)
};

// Rank `rank`'s call of `c` in a world of `world` ranks.
CaseCall case_call(const CollectiveCase& c, int rank, int world);

// The case's members, sorted.
std::vector<int> case_members(const CollectiveCase& c, int world);

}  // namespace collie::conformance
