// What an algorithm sees of the world: its group (ranks are group ranks
// 0..size()-1), point-to-point messages scoped to one collective call, and
// the transport's memory operations. Algorithms never see the transport
// itself, the matching engine or global ranks.
//
// Invariants every algorithm keeps:
//   - It never writes into a buffer whose send has not completed.
//   - It combines operands in an order fixed by (group size, rank, count),
//     never by arrival order, so results do not depend on timing or seed.
//   - Step tags are unique per (sender, receiver) within one call.
// Once the call has ended -- failed by a timeout, a lost peer or an abort --
// every method that would touch a buffer throws the call's error instead:
// its caller may already have freed the buffers.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/frame.h"
#include "core/group.h"
#include "core/message_engine.h"
#include "core/observer.h"
#include "core/send_scribble.h"
#include "core/task.h"
#include "core/tensor.h"
#include "core/transport.h"
#include "core/transport_call.h"
#include "core/work.h"

namespace collie {

class CollectiveContext {
 public:
  CollectiveContext(MessageEngine& engine, Transport& transport, const GroupState& group, const Fingerprint& fp,
                    std::shared_ptr<OpInfo> info, OpObserver* observer = nullptr)
      : engine_(engine), t_(transport), ranks_(group.members), me_(group.my_rank), context_(group.coll_context),
        digest_(group.digest), fp_(fp), info_(std::move(info)), observer_(observer) {}

  // The call's Work: once it has completed, the algorithm must stop.
  void bind(std::shared_ptr<WorkState> outer) { outer_ = std::move(outer); }
  const std::shared_ptr<WorkState>& call_work() const { return outer_; }

  int size() const { return static_cast<int>(ranks_->size()); }
  int rank() const { return me_; }
  const OpInfo& info() const { return *info_; }
  std::uint32_t context() const { return context_; }
  std::uint64_t seq() const { return fp_.seq; }

  // Names the algorithm step the call is entering ("reduce_scatter 2"): it
  // shows in traces, timeouts and deadlock reports, and crash faults can
  // target it.
  // `phase` must have static storage duration (a string literal).
  void step(const char* phase, int index = -1) {
    info_->step_phase = phase;
    info_->step_index = index;
    if (observer_ && observer_->wants_steps()) observer_->step_begin(info_->rank, info_->id, info_->step(), t_.now());
  }

  Work send(int peer, int tag, TensorView buf) {
    stop_if_ended();
    SendSpec s;
    s.dst = (*ranks_)[static_cast<std::size_t>(peer)];
    s.context = context_;
    s.group_digest = digest_;
    s.tag = tag;
    s.fp = fp_;
    s.buf = buf;
    s.keepalive = scratch_;
    return Work(engine_.send(s, info_));
  }
  // Receives into buf (overwrite).
  Work recv(int peer, int tag, TensorView buf) { return post_recv(peer, tag, buf, false, ReduceOp::kSum); }
  // Receives and combines into buf: buf = buf (op) message. Completes after
  // the reduction's compute time.
  Work recv_reduce(int peer, int tag, TensorView buf, ReduceOp op) { return post_recv(peer, tag, buf, true, op); }

  // dst = dst (op) src, charging this rank's compute time.
  Task<void> reduce_local(TensorView dst, TensorView src, ReduceOp op) {
    stop_if_ended();
    if (dst.count) {
      TransportCall call("reduce()");
      t_.reduce(dst.data, src.data, dst.count, dst.dtype, op);
    }
    if (dst.bytes()) co_await ComputeTime{&t_, dst.bytes()};
  }
  void copy(TensorView dst, TensorView src) {
    stop_if_ended();
    if (dst.bytes() && dst.data != src.data) {
      TransportCall call("copy()");
      t_.copy(dst.data, src.data, dst.bytes());
    }
  }
  // A scratch tensor in the transport's memory (its memory_space(), where
  // the call's tensors are too); `holder` keeps it alive, and so does every
  // send of the call until its transport completes it (an algorithm that
  // stops early frees nothing a transport still reads).
  TensorView scratch(DType dtype, std::size_t count, std::shared_ptr<std::byte>& holder) {
    const std::size_t bytes = count * dtype_size(dtype);
    holder = t_.allocate(bytes);
    if (std::string fault = allocation_fault(t_, holder.get(), bytes); !fault.empty()) [[unlikely]] {
      engine_.report_contract_violation(fault);  // ends the call (and every op of the rank)
      stop_if_ended();
      throw Error(ErrorKind::kTransport, info_->context({}), "the transport broke its contract: " + fault);
    }
    if (!scratch_) scratch_ = std::make_shared<std::vector<std::shared_ptr<std::byte>>>();
    scratch_->push_back(holder);
    return TensorView{holder.get(), dtype, count, t_.memory_space()};
  }

 private:
  struct ComputeTime {
    Transport* t;
    std::uint64_t bytes;
    bool await_ready() const noexcept { return !t->charges_compute_time(); }
    void await_suspend(std::coroutine_handle<> h) const {
      TransportCall call("schedule_after_compute()");
      t->schedule_after_compute(bytes, h);
    }
    void await_resume() const {
      if (TransportCall::current()) [[unlikely]] note_resumed_inside_call(t, "a reduction's compute time");
      restore_scribbles(t);
    }
  };
  Work post_recv(int peer, int tag, TensorView buf, bool reduce, ReduceOp op) {
    stop_if_ended();
    RecvSpec s;
    s.src = (*ranks_)[static_cast<std::size_t>(peer)];
    s.context = context_;
    s.group_digest = digest_;
    s.tag = tag;
    s.seq = fp_.seq;
    s.buf = buf;
    s.reduce = reduce;
    s.op = op;
    return Work(engine_.recv(s, info_));
  }

  void stop_if_ended() const {
    if (outer_ && outer_->completed)
      std::rethrow_exception(outer_->error ? outer_->error
                                           : std::make_exception_ptr(Error(ErrorKind::kUsage, info_->context({}),
                                                                           "the call already ended")));
  }

  MessageEngine& engine_;
  Transport& t_;
  std::shared_ptr<WorkState> outer_;
  std::shared_ptr<const std::vector<int>> ranks_;  // the group's global ranks
  int me_;
  std::uint32_t context_;
  std::uint64_t digest_;
  Fingerprint fp_;
  std::shared_ptr<OpInfo> info_;
  OpObserver* observer_;
  std::shared_ptr<std::vector<std::shared_ptr<std::byte>>> scratch_;  // every scratch() of the call
};

}  // namespace collie
