// Dist: the op-level seam -- torch.distributed's operations as one rank of a
// job calls them (the `dist` of `import torch.distributed as dist`).
//
// Everything that checks an implementation -- the scenario interpreter, the
// conformance suite's property cases, `collie bench` -- drives ranks through
// this interface and nothing else. collie's own Communicator (core/
// communicator.h: the core's algorithms over a Transport) is one
// implementation; adapters to libraries collie did not write (Open MPI,
// torch.distributed backends, NCCL) are others. The checks cannot tell them
// apart, so every implementation gets the same oracle, the same reports.
//
// Contract
// --------
// Ranks and roots are global, as in torch; tags are >= 0; a group is
// created by every rank of the world, in the same order, member or not
// (torch's new_group rule), and a rank outside an op's group gets a Work
// that is already complete with not_member() true and touches nothing.
//
// Every op returns a Work at once or throws. Arguments that are wrong on
// this rank alone (bad rank, list length, an op the dtype does not take) may
// throw collie::Error from the call or fail the Work; an (op, dtype, reduce
// op) the implementation does not provide fails with ErrorKind::kUnsupported
// naming what is missing, so checks skip it with that reason instead of
// passing or failing it. Ranks that disagree (dtype, count, root, op) get an
// error on the Work where the implementation detects it -- collie's core
// always does; a library may not, which the checks report.
//
// Buffers: the caller keeps every tensor of an op alive until its Work
// completes, does not modify what an op reads, and does not touch what it
// writes (torch's rule for async_op=True). Ops write in place: recv,
// broadcast, reduce and all_reduce their tensor; scatter its output; gather
// the root's list; all_gather and all_to_all their output list;
// all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor and
// all_to_all_single their output.
//
// Completion: Works complete from inside executor().run_until() and resume
// a coroutine that co_awaits them from there. A blocking op (send, recv and
// every collective without a handle) is awaited by the caller at once, so an
// implementation that can only block (one rank per process) may run it to
// completion inside the call and return it completed. The executor's clock
// is the rank's: virtual time on the simulator, wall time elsewhere.
//
// One thread calls a Dist at a time, and only from its executor's thread.
#pragma once

#include <span>
#include <string>
#include <stdexcept>
#include <vector>

#include "core/algorithm.h"
#include "core/executor.h"
#include "core/group.h"
#include "core/reduce_op.h"
#include "core/tensor.h"
#include "core/work.h"

namespace collie {

// One point-to-point op of a batch_isend_irecv (torch's P2POp).
struct P2POp {
  bool is_send = true;  // isend; false: irecv
  TensorView tensor;
  int peer = -1;        // global rank
  int tag = 0;
};

// Per-call options of a collective.
struct CollectiveOptions {
  // Forces one of collie's algorithms; it must implement the collective
  // (else invalid_argument). kAuto: the implementation chooses. Libraries
  // that choose their own algorithms ignore it.
  Algorithm algorithm = Algorithm::kAuto;
  // Overrides the group's / communicator's timeout for this call; 0: inherit.
  Nanos timeout_ns = 0;
  // torch's async_op=True: the caller keeps the Work and waits for it later.
  // False: the blocking form, awaited at once. Libraries call their own
  // asynchronous or blocking function accordingly; collie's core has one.
  bool async_op = false;
  // The caller knows that the call cannot have completed when it is issued
  // (a member of its group calls it later): DistCall::must_be_pending.
  bool must_be_pending = false;
  // async_op only: the caller polls the Work's is_completed() for up to
  // poll_ns before it waits, as a program spinning on is_completed() does
  // (torch: "returns True if completed", no wait() needed). A library whose
  // op completes only inside wait() is found out: DistCall::poll_ns. 0:
  // waits at once. collie's core ignores it (its Works complete as the
  // executor runs, whoever waits).
  Nanos poll_ns = 0;
};

// An error a library raised in its own words (a torch RuntimeError, an MPI
// error string), with the op it happened in: what() is "rank 1: all_reduce
// #2 on world: <the library's message>". collie's own errors are
// collie::Error with a kind.
class LibraryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the rank's worker process saw the library do wrong to an op the
// library said had succeeded (a handle that said done before its outputs
// were written, memory written around a tensor, is_success() False after a
// clean wait()): a failure of the run whatever its scenario expects -- an
// expected error is the library's own, never this.
class LibraryCheckFailure : public LibraryError {
 public:
  using LibraryError::LibraryError;
};

// The blocks all_to_all_single cuts `t` into for a group of n ranks called
// `group_name`: by `splits` (element counts, one per rank, adding up to
// t.count) or, with no splits, n equal blocks. `what` is "input" or
// "output". Throws std::invalid_argument naming torch's rule that is broken
// ("input_split_sizes add up to 6 but the input tensor has 7 elements").
std::vector<TensorView> split_blocks(TensorView t, std::span<const std::size_t> splits, std::size_t n,
                                     const std::string& what, const std::string& group_name);

class Dist {
 public:
  virtual ~Dist() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Completes this rank's Works and keeps its clock.
  virtual Executor& executor() = 0;

  // ---- groups ------------------------------------------------------------
  virtual Group world() const = 0;
  // A group of `ranks` (any order, no duplicates, each in [0, world_size)).
  // Non-members get a handle whose rank() is -1. `timeout_ns`: the group's
  // op timeout (0: the default). `name`: how errors and reports call it (a
  // scenario's "group 'pair'"); empty: the implementation's own name.
  virtual Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) = 0;
  // torch's destroy_process_group(g): releases what the implementation holds
  // for g. Every rank of the world calls it for the group, member or not, as
  // it called new_group. The caller has waited for every op it issued on g
  // (torch leaves destroying a group with work in flight undefined; collie's
  // checks never do it). Afterwards no op may use g or a copy of its handle:
  // dispatch() and collie's core throw Error(kInvalidArgument) naming it. A
  // group's id is never reused: a later new_group of the same ranks is a new
  // group. Refuses the world and a group destroyed already
  // (mark_group_destroyed(), which every implementation calls first).
  virtual void destroy_group(const Group& g) = 0;

  // ---- point-to-point ----------------------------------------------------
  // Messages with the same (src, dst, group, tag) never overtake each other.
  // send() and recv() are the blocking forms (the caller awaits them at
  // once); a blocking send to this rank itself is an error.
  // `timeout_ns`: the call's own timeout, overriding the group's (0:
  // inherit): an op not complete by then fails with a timeout error naming
  // it (torch: Work.wait(timeout) on the handle of isend/irecv). Where the
  // op goes after it timed out is unspecified (torch: it keeps running).
  // `poll_ns` (isend/irecv): the caller polls the Work's is_completed() for
  // up to poll_ns before it waits, as CollectiveOptions::poll_ns.
  virtual Work send(TensorView t, int dst, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0) = 0;
  virtual Work isend(TensorView t, int dst, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0,
                     Nanos poll_ns = 0) = 0;
  virtual Work recv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0) = 0;
  virtual Work irecv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0,
                     Nanos poll_ns = 0) = 0;

  // ---- collectives -------------------------------------------------------
  virtual Work broadcast(TensorView t, int src, const Group& g = {}, CollectiveOptions o = {}) = 0;
  // Non-destination tensors: torch leaves them unspecified; collie's core
  // leaves them unchanged.
  virtual Work reduce(TensorView t, int dst, ReduceOp op = ReduceOp::kSum, const Group& g = {},
                      CollectiveOptions o = {}) = 0;
  // Bitwise-identical results on every rank.
  virtual Work all_reduce(TensorView t, ReduceOp op = ReduceOp::kSum, const Group& g = {},
                          CollectiveOptions o = {}) = 0;
  // scatter_list: exactly group-size tensors on src, empty elsewhere.
  virtual Work scatter(TensorView out, int src, std::span<const TensorView> scatter_list, const Group& g = {},
                       CollectiveOptions o = {}) = 0;
  // gather_list: exactly group-size tensors on dst, empty elsewhere.
  virtual Work gather(TensorView in, int dst, std::span<const TensorView> gather_list, const Group& g = {},
                      CollectiveOptions o = {}) = 0;
  // tensor_list: exactly group-size tensors, on every rank.
  virtual Work all_gather(std::span<const TensorView> tensor_list, TensorView in, const Group& g = {},
                          CollectiveOptions o = {}) = 0;
  // torch's all_gather_into_tensor: `out` holds group-size * in.count
  // elements; group rank i's input lands in [i * in.count, (i+1) * in.count).
  virtual Work all_gather_into_tensor(TensorView out, TensorView in, const Group& g = {},
                                      CollectiveOptions o = {}) = 0;
  // input_list: exactly group-size tensors, each of out's dtype and count;
  // group rank i's `out` receives the reduction of every rank's
  // input_list[i]. The inputs are only read.
  virtual Work reduce_scatter(TensorView out, std::span<const TensorView> input_list, ReduceOp op = ReduceOp::kSum,
                              const Group& g = {}, CollectiveOptions o = {}) = 0;
  // torch's reduce_scatter_tensor: `in` holds group-size * out.count
  // elements of out's dtype; its block i ([i * out.count, (i+1) * out.count))
  // is group rank i's share.
  virtual Work reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op = ReduceOp::kSum, const Group& g = {},
                                     CollectiveOptions o = {}) = 0;
  // output_list, input_list: exactly group-size tensors of one dtype each;
  // input_list[j] goes to group rank j, where it lands in output_list[i]
  // (i: this rank's group rank). Blocks may differ in size; the two ends of
  // each pair must agree (else size_mismatch where it is detected).
  virtual Work all_to_all(std::span<const TensorView> output_list, std::span<const TensorView> input_list,
                          const Group& g = {}, CollectiveOptions o = {}) = 0;
  // torch's all_to_all_single: `in` is cut into group-size consecutive
  // blocks of input_split_sizes[j] elements (empty: equal blocks, so
  // in.count must divide by the group size), block j going to group rank j;
  // `out` is cut by output_split_sizes the same way, block i receiving what
  // rank i sent. Splits here count elements; torch's count rows of dim 0
  // (callers multiply by the row's size). Same fingerprint as all_to_all.
  virtual Work all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> output_split_sizes = {},
                                 std::span<const std::size_t> input_split_sizes = {}, const Group& g = {},
                                 CollectiveOptions o = {}) = 0;
  virtual Work barrier(const Group& g = {}, CollectiveOptions o = {}) = 0;
  // torch's monitored_barrier: a barrier whose first member (group rank 0)
  // waits at most `timeout_ns` (0: the group's timeout) for every other
  // member to arrive, then releases them. A member that does not arrive in
  // time fails it on the first member with an error naming that rank --
  // the first missing one, or every missing one with wait_all_ranks -- and
  // the others time out waiting to be released. Blocking only (no async
  // form). The default fails with kUnsupported.
  virtual Work monitored_barrier(const Group& g = {}, Nanos timeout_ns = 0, bool wait_all_ranks = false);
  // torch's batch_isend_irecv: every op (an isend or an irecv of a global
  // peer, on group `g`) issued at once; the Work completes once all have,
  // failing with the first failed op's error. The default issues them with
  // isend()/irecv() and joins their Works; a library with a batching call
  // of its own (NCCL's group calls, torch's coalescing) maps it to that.
  virtual Work batch_isend_irecv(std::span<const P2POp> ops, const Group& g = {});

  // ---- reports -----------------------------------------------------------
  // Unfinished ops, one line each, for timeout and hang reports.
  virtual std::vector<std::string> describe_pending() const { return {}; }
};

}  // namespace collie
