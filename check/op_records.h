// What a run records for the checks: every collective call's inputs and
// outputs on every rank, every send and every receive -- the same records
// whatever implementation ran the ops (collie's core on any transport, or a
// library driven through the op-level seam, core/dist.h), because they are
// taken at the seam.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/frame.h"
#include "core/reduce_op.h"
#include "core/tensor.h"

namespace collie::check {

// One collective call, across the ranks of its group.
struct CollectiveRecord {
  CollectiveKind kind = CollectiveKind::kBarrier;
  std::string where;          // the call site, for messages ("f.yaml:12:5")
  std::vector<int> members;   // sorted global ranks
  int root = -1;              // global; broadcast, reduce, scatter, gather
  ReduceOp op = ReduceOp::kSum;
  // By global rank. Inputs as issued: the tensor of broadcast (root only),
  // reduce, all_reduce, gather and all_gather; scatter's list (root only).
  // Outputs once complete: the tensor of broadcast, reduce (every rank) and
  // all_reduce; scatter's output; gather's list (root only, empty
  // elsewhere); all_gather's list (all_gather_into_tensor's output cut into
  // the blocks of that list). Block-wise ops record one block per group
  // rank: reduce_scatter's input list (reduce_scatter_tensor's input cut
  // into it) and its output; all_to_all's input and output lists
  // (all_to_all_single's tensors cut by their split sizes).
  std::map<int, std::vector<Tensor>> inputs;
  std::map<int, std::vector<Tensor>> outputs;
  std::set<int> issued;       // ranks that called it
  // By global rank: the op id (OpInfo::id) each caller's call got, where
  // the recorder was told (CallRecorder::issued).
  std::map<int, std::uint64_t> op_ids;

  // How whoever made the inputs wants the values judged; the defaults suit
  // any inputs.
  struct Judging {
    // The inputs make every result exact in any order of combination
    // (nccl-tests' choice): results must be the oracle's bits.
    bool exact = false;
    // Floating inputs hold NaNs, infinities and signed zeros: a NaN's sign
    // or payload, a zero's sign, and whether MIN/MAX propagate NaN are
    // differences torch leaves open (unspecified findings), not violations.
    bool special_values = false;
    // all_reduce on collie's core with an algorithm that combines in one
    // known butterfly order: the distances it pairs group ranks at, first
    // to last. The result must be that order's bits; another order's
    // rounding is an unspecified finding. Empty: any order.
    std::vector<std::size_t> butterfly;
  } judging;
};

struct RecvRecord {
  int rank = -1;              // the receiver
  std::string group;
  int tag = 0;
  int source = -1;            // who the receive matched (global)
  std::uint64_t order = 0;    // posting order on the receiver
  Tensor data;
  std::string where;
};

// One message a rank sent, as it was when the send was issued.
struct SentMessage {
  Tensor data;
  std::uint64_t op = 0;       // the sender's op id (OpInfo::id); 0: not known
};

struct OpRecords {
  bool enabled = true;
  // By (group name, the call's sequence number in the group, 1-based).
  std::map<std::pair<std::string, std::uint64_t>, CollectiveRecord> collectives;
  // By (src, dst, group, tag): what src sent, in send order.
  std::map<std::tuple<int, int, std::string, int>, std::vector<SentMessage>> sends;
  std::vector<RecvRecord> recvs;
  // Buffers an op changed that it must not: an operand it only reads, a
  // send's buffer, any buffer of a rank outside the op's group. One line
  // each, found while recording (check/call_recorder.h).
  std::vector<std::string> buffer_findings;
};

}  // namespace collie::check
