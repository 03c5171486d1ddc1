// The ops as one table, and one call of an op as a value.
//
// Every torch.distributed op collie checks is one row of op_table(): its
// name and async form, the tensors it takes and which ranks of the group
// read and write them, its peer or root, and whether it takes a tag, a
// reduce op, split sizes, an algorithm or a timeout. A DistCall is one
// rank's call of one op with all its arguments, and dispatch() makes that
// call on any Dist (core/dist.h).
//
// Everything above core/ that handles ops as such -- the scenario loader
// and interpreter, the op protocol and the workers, bench, the property
// cases, the records and the checks -- reads this table and passes
// DistCalls instead of switching on op names. What remains per op is its
// own algorithm (core/algorithms/), its reference (check/reference.h), and
// each library's mapping (backends/mpi/, backends/torch/). docs/
// architecture.md says how to add an op.
//
// Operands. An op takes up to three tensor arguments, in fixed slots named
// as the scenario format names them: `tensor` (the op's one tensor: what
// send sends, what all_reduce reduces in place, what gather contributes),
// `list` (a list of group-size tensors: scatter's and gather's lists,
// all_gather's output list, reduce_scatter's and all_to_all's input lists)
// and `output` (the one-tensor forms' output tensor, all_to_all's output
// list). batch_isend_irecv instead takes a list of point-to-point ops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/algorithm.h"
#include "core/dist.h"
#include "core/frame.h"
#include "core/group.h"
#include "core/reduce_op.h"
#include "core/tensor.h"
#include "core/work.h"

namespace collie {

// One value per row of op_table(), in its order. A value without its row
// fails to compile (op_table() checks every row's kind against its index).
enum class OpKind : std::uint8_t {
  kSend,
  kRecv,
  kBroadcast,
  kReduce,
  kAllReduce,
  kScatter,
  kGather,
  kAllGather,
  kAllGatherIntoTensor,
  kReduceScatter,
  kReduceScatterTensor,
  kAllToAll,
  kAllToAllSingle,
  kBarrier,
  kMonitoredBarrier,
  kBatchIsendIrecv,
};
inline constexpr std::size_t kNumOpKinds = static_cast<std::size_t>(OpKind::kBatchIsendIrecv) + 1;

// Which members of the op's group an operand concerns.
enum class Ranks : std::uint8_t {
  kNone,
  kEvery,  // every member
  kRoot,   // the root only (others pass an empty list)
};

// The tensor slots, in the order the op protocol sends them.
enum class Slot : std::uint8_t { kTensor = 0, kList = 1, kOutput = 2 };
inline constexpr std::size_t kNumSlots = 3;
std::string_view slot_name(Slot s);  // "tensor", "list", "output"

struct Operand {
  enum class Form : std::uint8_t { kAbsent, kTensor, kList };
  Form form = Form::kAbsent;
  Ranks reads = Ranks::kNone;   // whose values the op reads
  Ranks writes = Ranks::kNone;  // whose values the op writes
  // The oracle (check/reference.h) sees this operand as one block per
  // group rank: a one-tensor form's tensor cut into equal blocks, or by
  // the call's split sizes where the op takes them.
  bool blocks = false;

  bool present() const { return form != Form::kAbsent; }
  bool is_list() const { return form == Form::kList; }
  // Whether the member that is (or is not) the root reads / writes it.
  bool read_by(bool is_root) const { return reads == Ranks::kEvery || (reads == Ranks::kRoot && is_root); }
  bool written_by(bool is_root) const { return writes == Ranks::kEvery || (writes == Ranks::kRoot && is_root); }
  // A root-only list is empty on the other members.
  bool passed_by(bool is_root) const {
    return present() && (!(reads == Ranks::kRoot || writes == Ranks::kRoot) || is_root ||
                         reads == Ranks::kEvery || writes == Ranks::kEvery);
  }
};

enum class OpFamily : std::uint8_t {
  kPointToPoint,  // send, recv (and their async forms isend, irecv)
  kCollective,    // every member calls it; numbered per group; checked against the oracle
  kBatch,         // batch_isend_irecv: point-to-point ops issued together
};

struct OpSpec {
  OpKind kind;
  std::string_view name;        // torch's name of the blocking form: "send", "all_reduce"
  std::string_view async_name;  // the async form's own name ("isend"); empty: async_op=True, or none
  OpFamily family;
  // The fingerprint's kind (core/frame.h): what the oracle computes.
  // kNone for point-to-point ops and batches.
  CollectiveKind collective;
  // The peer or root argument as torch and scenarios name it: "dst",
  // "src", or empty when the op has none.
  std::string_view peer_key;
  bool rooted;        // the peer is the group's root (else a point-to-point peer)
  bool any_source;    // the peer may be kAnySource
  bool tag;           // takes a tag
  bool reduce_op;     // takes a reduce op
  bool splits;        // takes input/output split sizes (all_to_all_single)
  bool algorithm;     // one of collie's algorithms may be forced
  bool timeout;       // takes its own timeout
  bool blocking;      // has a blocking form
  bool async;         // has an async form
  std::array<Operand, kNumSlots> operands;  // by Slot
  std::string_view summary;                 // one line: what it does

  const Operand& operand(Slot s) const { return operands[static_cast<std::size_t>(s)]; }
};

// Every op, indexed by OpKind.
std::span<const OpSpec, kNumOpKinds> op_table();
const OpSpec& op_spec(OpKind k);

// An op by torch's name, blocking or async ("isend" is kSend, async).
struct NamedOp {
  OpKind kind;
  bool async;
};
std::optional<NamedOp> parse_op(std::string_view name);
// Every name parse_op() takes, blocking forms first, in table order.
std::vector<std::string> op_names();
// The name of one form: "isend" for an async send, "all_reduce" whether
// async or not.
std::string_view op_name(OpKind k, bool async);

// One rank's call of one op. Fields the op does not take are ignored.
struct DistCall {
  OpKind kind = OpKind::kBarrier;
  bool async = false;              // isend/irecv, or a collective's async_op=True
  Group group;                     // default: the world
  int peer = -1;                   // dst, src or root: a global rank; kAnySource for any-source receives
  int tag = 0;
  ReduceOp reduce_op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  Nanos timeout_ns = 0;            // the call's own timeout; 0: the group's
  bool wait_all_ranks = false;     // monitored_barrier: name every missing rank, not the first
  TensorView tensor;               // Slot::kTensor
  std::vector<TensorView> list;    // Slot::kList
  TensorView output;               // Slot::kOutput, a tensor
  std::vector<TensorView> output_list;  // Slot::kOutput, a list
  // all_to_all_single's splits in elements (empty: equal blocks).
  std::vector<std::size_t> input_splits, output_splits;
  std::vector<P2POp> p2p;          // batch_isend_irecv
  // The caller knows that the call cannot have completed when it is issued
  // (a member of its group calls it later): an implementation whose handle
  // says it completed at once is wrong. A hint for the checks of a rank's
  // worker process (backends/remote/), which it reaches through the
  // collectives' CollectiveOptions; collie's core ignores it.
  bool must_be_pending = false;
  // The caller polls the async Work's is_completed() for up to poll_ns
  // before it waits (CollectiveOptions::poll_ns); a rank's worker process
  // polls the library's handle so and fails the op when it completed only
  // inside wait(). 0: waits at once.
  Nanos poll_ns = 0;

  const OpSpec& spec() const { return op_spec(kind); }
  std::string_view name() const { return op_name(kind, async); }
  CollectiveOptions options() const { return CollectiveOptions{algorithm, timeout_ns, async, must_be_pending, poll_ns}; }
  // The views of slot `s` (a tensor slot gives one view).
  std::vector<TensorView> views(Slot s) const;
  // Sets slot `s` from `views` (a tensor slot takes exactly one).
  void set_views(Slot s, std::vector<TensorView> views);
};

// Makes `c` on `d`: the Dist method of c.kind with c's arguments.
Work dispatch(Dist& d, const DistCall& c);

// The operand of slot `s` as the oracle sees it on this rank: its views,
// cut into group-size blocks where the table says so (by the call's splits
// when it has them). `group_size` is the op's group's size.
std::vector<TensorView> oracle_blocks(const DistCall& c, Slot s, std::size_t group_size);

}  // namespace collie
