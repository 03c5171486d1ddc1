// Communicator: one rank's view of a job -- torch.distributed's API.
//
// Semantics follow torch.distributed (Gloo/MPI where they agree; the stricter
// choice where they differ, see docs/semantics.md):
//   - Ranks are global everywhere (src, dst, roots), as in torch; a rank that
//     is not in the op's group is an invalid_argument error.
//   - Collectives work in place on the caller's tensors. reduce() leaves every
//     non-destination tensor unchanged. all_reduce() leaves bitwise-identical
//     results on every rank.
//   - Every op returns a Work at once; `co_await` it in a coroutine (the
//     blocking form on the simulator) or wait() on it with one rank per
//     process. Arguments that are wrong on this rank alone (bad rank, list
//     length, unsupported op/dtype) throw collie::Error(kInvalidArgument)
//     from the call itself, before anything is sent; disagreements between
//     ranks (dtype, count, root, op, algorithm) fail the Work with
//     collective_mismatch naming both calls.
//   - A rank that is not a member of the op's group gets a Work that is
//     already complete with not_member() true, and touches nothing.
// A Communicator is used from its transport's executor only (one thread).
// Tensors passed to an op must stay alive until its Work completes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/algorithm.h"
#include "core/dist.h"
#include "core/group.h"
#include "core/message_engine.h"
#include "core/observer.h"
#include "core/reduce_op.h"
#include "core/tensor.h"
#include "core/transport.h"
#include "core/work.h"

namespace collie::algorithms {
class Blocks;
}

namespace collie {

struct CommunicatorOptions {
  // Sends of at most this many bytes complete without waiting for the
  // receiver (eager); larger ones wait for a matching receive (rendezvous).
  std::size_t eager_threshold_bytes = 64 * 1024;
  // How collectives choose an algorithm when none is forced.
  AlgorithmSelection selection;
  // Forces one algorithm for every collective it supports (kAuto: choose).
  Algorithm force_algorithm = Algorithm::kAuto;
  // Every op that has not completed after this long on this rank's clock
  // fails with a timeout error naming what it still waits for (torch's
  // init_process_group timeout). 0: no timeout. Groups and ops may override.
  Nanos default_timeout_ns = 0;
  // Told about every op and algorithm step (traces, op-targeted faults).
  OpObserver* observer = nullptr;
  // Checking runs: a completed send's buffer holds a pattern until its
  // rank runs again, and a payload that arrives holding it fails the run
  // naming the transport that read the buffer late (core/send_scribble.h).
  bool scribble_completed_sends = false;
  // The id of this rank's first send (each later send takes the next; a
  // rendezvous carries its send's id as its rendezvous_id). Checking runs
  // start at kCheckingFirstSendId so that a transport that keeps fewer
  // bits of an id than frame.h's 64 (16, 31, 32) is wrong at its first
  // rendezvous, not after 65,536 sends. The simulator's trace hash mixes
  // an id's low 32 bits only, so a checking run and a timing-only run of
  // one scenario and seed hash alike.
  std::uint64_t first_send_id = 1;
};

// 2^32 + 1: every id is past 32 bits, and its low 32 bits count from 1.
inline constexpr std::uint64_t kCheckingFirstSendId = (std::uint64_t{1} << 32) + 1;

class Communicator final : public Dist {
 public:
  explicit Communicator(Transport& transport, CommunicatorOptions options = {});
  // The same with options shared by every rank of a world (one copy, not
  // one per rank).
  Communicator(Transport& transport, std::shared_ptr<const CommunicatorOptions> options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Executor& executor() override { return t_; }
  Transport& transport() { return t_; }
  const CommunicatorOptions& options() const { return *opts_; }

  // ---- groups ------------------------------------------------------------
  Group world() const override { return world_; }
  // Creates a group of `ranks` (any order, no duplicates, each in
  // [0, world_size)). Every rank must call it for every group, in the same
  // order. Non-members get a handle whose rank() is -1.
  // Unnamed groups are "group K {ranks}" in errors and reports.
  Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) override;
  // Marks g destroyed; its contexts stay registered (a frame a peer sent on
  // it before is still matched or reported), and are never reused.
  void destroy_group(const Group& g) override;
  // This rank's rank in `g` (-1 if not a member), like torch's get_rank(group).
  int rank_in(const Group& g) const;
  // Translations; invalid_argument when the rank is not in the group.
  int group_rank(const Group& g, int global_rank) const;
  int global_rank(const Group& g, int group_rank) const;

  // ---- point-to-point ----------------------------------------------------
  // dst/src are global ranks; tags are >= 0. Messages with the same
  // (src, dst, group, tag) never overtake each other.
  // send(): the blocking form; a send to this rank itself is an error (it
  // could never complete). isend() to itself matches a local irecv().
  Work send(TensorView t, int dst, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0) override;
  Work isend(TensorView t, int dst, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0,
             Nanos poll_ns = 0) override;
  // src may be kAnySource; Work::source_rank() tells who sent.
  Work recv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0) override;
  Work irecv(TensorView t, int src = kAnySource, int tag = 0, const Group& g = {}, Nanos timeout_ns = 0,
             Nanos poll_ns = 0) override;

  // ---- collectives -------------------------------------------------------
  Work broadcast(TensorView t, int src, const Group& g = {}, CollectiveOptions o = {}) override;
  Work reduce(TensorView t, int dst, ReduceOp op = ReduceOp::kSum, const Group& g = {},
              CollectiveOptions o = {}) override;
  Work all_reduce(TensorView t, ReduceOp op = ReduceOp::kSum, const Group& g = {}, CollectiveOptions o = {}) override;
  // scatter_list: exactly group-size tensors on src, empty elsewhere.
  Work scatter(TensorView out, int src, std::span<const TensorView> scatter_list, const Group& g = {},
               CollectiveOptions o = {}) override;
  // gather_list: exactly group-size tensors on dst, empty elsewhere.
  Work gather(TensorView in, int dst, std::span<const TensorView> gather_list, const Group& g = {},
              CollectiveOptions o = {}) override;
  // tensor_list: exactly group-size tensors, on every rank.
  Work all_gather(std::span<const TensorView> tensor_list, TensorView in, const Group& g = {},
                  CollectiveOptions o = {}) override;
  // torch's all_gather_into_tensor (NCCL's ncclAllGather): `out` holds
  // group-size * in.count elements of in's dtype; group rank i's input lands
  // in elements [i * in.count, (i+1) * in.count). Same fingerprint as
  // all_gather, so the two forms interoperate across ranks.
  Work all_gather_into_tensor(TensorView out, TensorView in, const Group& g = {}, CollectiveOptions o = {}) override;
  // input_list: exactly group-size tensors shaped like `out`.
  Work reduce_scatter(TensorView out, std::span<const TensorView> input_list, ReduceOp op = ReduceOp::kSum,
                      const Group& g = {}, CollectiveOptions o = {}) override;
  // `in` holds group-size * out.count elements (NCCL's ncclReduceScatter).
  // Same fingerprint as reduce_scatter: the two forms interoperate.
  Work reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op = ReduceOp::kSum, const Group& g = {},
                             CollectiveOptions o = {}) override;
  // Lists of exactly group-size tensors of one dtype; this rank's own
  // block (input_list[me] -> output_list[me]) must match in size. Forcing
  // bruck needs every block of the same size.
  Work all_to_all(std::span<const TensorView> output_list, std::span<const TensorView> input_list,
                  const Group& g = {}, CollectiveOptions o = {}) override;
  Work all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> output_split_sizes = {},
                         std::span<const std::size_t> input_split_sizes = {}, const Group& g = {},
                         CollectiveOptions o = {}) override;
  Work barrier(const Group& g = {}, CollectiveOptions o = {}) override;
  Work monitored_barrier(const Group& g = {}, Nanos timeout_ns = 0, bool wait_all_ranks = false) override;

  // ---- introspection -----------------------------------------------------
  // Unfinished ops, one line each, for deadlock and timeout reports.
  std::vector<std::string> describe_pending() const override;
  std::vector<std::string> describe_unexpected() const { return engine_.describe_unexpected(); }
  MessageEngine& engine() { return engine_; }

  // Fails every op still in flight with Error(kUsage, `why`); afterwards no
  // user buffer of those ops is read or written again. For owners tearing
  // down a communicator whose program may have abandoned ops (an exception
  // thrown past a Work). Returns how many ops it failed.
  std::size_t abort_pending(const std::string& why);

  // Timers (op timeouts) handed to the transport's schedule_at() and not
  // yet fired, and the earliest time one is armed for. A transport that
  // reports a deadlock while one is pending broke core/executor.h.
  std::size_t timers_pending() const { return timeouts_ ? timeouts_->timers_pending : 0; }
  std::optional<Nanos> earliest_timer() const { return timeouts_ ? timeouts_->armed : std::nullopt; }

 private:
  struct CollectiveCall;
  GroupState& resolve(const Group& g);
  const GroupState& resolve(const Group& g) const;
  Work p2p(bool is_send, bool blocking, TensorView t, int peer, int tag, const Group& g, Nanos timeout_ns);
  // Starts a collective whose algorithm is `body(CollectiveContext&)`, a
  // callable returning Task<void> (defined and used in communicator.cpp).
  template <typename Body>
  Work launch(CollectiveCall call, Body body);
  Work launch_all_gather(GroupState& g, algorithms::Blocks out, TensorView in, const CollectiveOptions& o);
  Work launch_reduce_scatter(const std::string& op_name, GroupState& g, TensorView out, algorithms::Blocks in,
                             ReduceOp op, const CollectiveOptions& o);
  Work launch_all_to_all(const std::string& op_name, GroupState& g, std::vector<TensorView> out,
                         std::vector<TensorView> in, const CollectiveOptions& o);
  std::shared_ptr<OpInfo> new_op(const std::string& op, const GroupState& g, std::int64_t seq);
  // Tells the observer that an op starts, before it posts anything: a
  // crash "at op K" then stops the rank before op K sends a frame, as a
  // process killed before it issues op K does, whether or not the op would
  // complete at once.
  void announce(const OpInfo& info);
  // The observer's end of an op and the timeout timer of an op that started.
  void watch(const std::shared_ptr<OpInfo>& info, const std::shared_ptr<WorkState>& w, const GroupState& g,
             Nanos timeout_override, bool collective);
  [[noreturn]] void invalid(const std::string& op, const GroupState& g, const std::string& detail,
                            std::vector<int> peers = {}) const;
  void check_root(const std::string& op, const GroupState& g, int root) const;
  // Every tensor of `tensors` with elements is in the transport's memory
  // space (core/transport.h); else invalid_argument naming `what`[i].
  void check_space(const std::string& op, const GroupState& g, std::span<const TensorView> tensors,
                   const char* what) const;
  Algorithm choose(const std::string& op, CollectiveKind kind, const GroupState& g, std::size_t bytes,
                   const CollectiveOptions& o) const;

  Transport& t_;
  std::shared_ptr<const CommunicatorOptions> opts_;  // never null
  int rank_;
  int world_size_;
  MessageEngine engine_;
  Group world_;
  int groups_created_ = 0;
  std::uint64_t ops_issued_ = 0;
  SpawnRegistry ops_;

  // Op timeouts. Every watched op with a timeout has an entry here; one
  // timer (the watchdog) is armed at the earliest deadline, so a job of a
  // million ops holds one timer, and entries of finished ops are swept
  // once they outnumber the live ones (memory stays proportional to the
  // ops in flight). Entries are kept in one FIFO lane per distinct timeout:
  // the clock never goes back, so each lane is in deadline order.
  struct Deadline {
    Nanos when = 0;
    std::weak_ptr<WorkState> work;
    std::shared_ptr<OpInfo> info;
    bool collective = false;
    std::uint32_t context = 0;
  };
  struct DeadlineLane {
    Nanos timeout = 0;
    std::deque<Deadline, PoolAllocator<Deadline>> entries;
  };
  // Made by the first op with a timeout (a simulated world holds every
  // rank's communicator; most runs set none).
  struct Timeouts {
    std::vector<DeadlineLane> lanes;
    std::size_t count = 0;  // entries in all lanes
    std::size_t after_sweep = 0;
    std::optional<Nanos> armed;  // the earliest time a watchdog is armed for
    std::size_t timers_pending = 0;  // watchdogs given to schedule_at() and not yet resumed
  };
  std::unique_ptr<Timeouts> timeouts_;
  Nanos last_now_ = 0;          // the clock at the latest op start: it never goes back
  Nanos created_at_ = 0;        // the clock when this communicator was made
  void arm(Nanos when);
  void expire_deadlines();
  friend Spawned watchdog(Communicator& c, Nanos when);
};

}  // namespace collie
