// The transport seam: the only way the core reaches the network, the clock,
// the executor and the memory that tensors live in.
//
// One Transport object serves one rank. The core (Communicator and the
// algorithms) is written against this interface alone and never learns which
// implementation it runs on -- the simulator (sim/), TCP sockets, or a GPU
// backend. Swap the transport, keep every semantic.
//
// Contract
// --------
// Threading: the core calls a Transport from one thread at a time, and the
// transport calls back into the core (FrameSink, scheduled coroutines) only
// from inside run_until() on that same thread. No callback ever runs
// concurrently with another callback or with a core call, nor inside one:
// post_send(), schedule*(), copy(), reduce(), finish_average() and
// allocate() return without delivering a frame or completing a send (the
// core marks those calls, core/transport_call.h, and fails the run on a
// callback made inside one).
//
// Network: the transport is a reliable frame pipe between ranks that may
// reorder frames -- the core restores per-channel order itself from
// FrameHeader::channel_seq, so in-order delivery is allowed but not required.
// Frames must not be lost, corrupted or delivered twice (a later fault layer
// may inject exactly these to test the core's diagnosis, not its results).
//
// Memory: every rank's tensors live in one memory space, the transport's
// memory_space() -- host memory, or device memory that the core never loads
// or stores itself. The transport owns moving and combining bytes there
// (post_send, copy, reduce, finish_average, allocate), so a GPU transport
// does them with copies and kernels on its own stream.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/executor.h"
#include "core/frame.h"
#include "core/reduce_op.h"
#include "core/tensor.h"

namespace collie {

// Implemented by the core; called by the transport from inside run_until().
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // A frame arrived for this rank. `payload` holds header.bytes bytes and is
  // valid only during the call: the core copies or reduces out of it (or
  // keeps a copy) before returning, through the transport's memory
  // operations. Data payloads (eager and data frames) are in memory_space()
  // -- on a device transport, possibly another rank's device memory; a
  // NACK's payload (the refusal's text) is host memory.
  virtual void on_frame(const FrameHeader& header, std::span<const std::byte> payload) = 0;
  // Where the payload of the data frame `header` may go directly, so that
  // on_frame() has nothing left to do: exactly header.bytes bytes of the
  // receive's own buffer (`dst`, in memory_space()), to be overwritten or, with `reduce`,
  // combined element by element (dst = dst op payload, as reduce() does);
  // or an empty `dst` when the payload must be handed over through
  // on_frame() as usual. The answer is valid only until control returns to
  // the executor (the receive may be aborted and its buffer freed after
  // that): a transport asks again before each write into it, and drops the
  // payload if the answer changes. Having landed all of it, the transport
  // calls on_frame() with `payload` being `dst`.
  // Optional: transports that do not land payloads never call it.
  struct Landing {
    std::span<std::byte> dst;
    bool reduce = false;
    DType dtype = DType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
  };
  virtual Landing landing_zone(const FrameHeader& header) {
    (void)header;
    return {};
  }
  // The send posted with `cookie` no longer needs its payload buffer.
  virtual void on_send_complete(void* cookie) = 0;
  // The transport lost its connection to `peer` for good. `clean` means the
  // peer said goodbye first (its program finished): only ops that still
  // wait for it fail. Otherwise it died or the link broke: every op waiting
  // on it and every collective of a group it belongs to fail, naming it.
  // After this call no frame from `peer` arrives (the core fails one that
  // does as a contract violation). Sends to `peer` already posted may still
  // be completed, once, or never: the core keeps their buffers until then.
  // Once per peer; the core ignores a repeat.
  virtual void on_peer_lost(int peer, const std::string& why, bool clean) = 0;
};

class Transport : public Executor {
 public:

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // ---- network -----------------------------------------------------------
  // Registers the sink that receives this rank's frames. Called once, before
  // the first post_send().
  virtual void attach(FrameSink* sink) = 0;

  // Sends `header` (+ `payload`, header.bytes long) to header.dst, which is
  // never this rank. Returns at once. The payload of an eager or data frame
  // is in memory_space(); a NACK's is host memory. Requires: `payload` stays valid and
  // unmodified until on_send_complete(cookie) -- which is called exactly once,
  // later, from inside run_until() and never inside this call, unless cookie
  // is null, in which case it is never called. Completion may come after the
  // frame's delivery and after the ops that needed it finished (a NACK's send
  // has no op at all): once its programs end, a world runs the transport
  // until every completion owed by a live peer came, and fails the run if
  // one never does.
  virtual void post_send(const FrameHeader& header, std::span<const std::byte> payload,
                         void* cookie) = 0;

  // ---- executor (core/executor.h) ----------------------------------------
  // schedule(), schedule_at(), run_until() and now() as Executor says, with
  // this rank's clock. Also:

  // Resumes `h` once this rank has spent the compute time that reducing
  // `bytes` bytes costs (the simulator charges its gamma; real transports do
  // the work synchronously and resume as schedule() does).
  virtual void schedule_after_compute(std::uint64_t bytes, std::coroutine_handle<> h) = 0;

  // True when reductions cost time that only schedule_after_compute() makes
  // pass (the simulator's virtual compute time). False, the default, for
  // transports that reduce synchronously: the core then carries on at once
  // instead of scheduling a resumption.
  virtual bool charges_compute_time() const { return false; }

  // False only for a transport that moves no payload bytes at all (the
  // simulator's timing-only mode, whose tensors have no memory): its frames
  // arrive with an empty payload whatever header.bytes says. Every other
  // transport delivers exactly header.bytes bytes, and the core fails a
  // frame that differs as a contract violation.
  virtual bool moves_payloads() const { return true; }

  // ---- memory ------------------------------------------------------------
  // Where this rank's tensors live. Every tensor with elements that an op is
  // given must be in this space (the Communicator refuses others with
  // invalid_argument), and so is everything allocate() returns. kHost, the
  // default: the core may also read and write it directly. kDevice: the
  // core reaches it only through post_send() and the four calls below,
  // never with host loads and stores.
  virtual MemorySpace memory_space() const { return MemorySpace::kHost; }

  // The defaults operate on host memory, at once; device transports
  // override them. A device transport may run them asynchronously, in one
  // order per rank (its stream): each takes effect after every memory
  // operation, landed payload and post_send() of this rank issued before
  // it, and before any issued after it; a payload handed to on_frame()
  // stays valid until the operations the core issued on it inside the call
  // have taken effect. Operands are in memory_space() or, for `src`, a
  // payload delivered by on_frame(). A call's ranges are equal or disjoint,
  // never partly overlapping (the core's buffers do not alias), so a copy
  // may run in any direction.
  virtual void copy(void* dst, const void* src, std::size_t bytes);
  virtual void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
  virtual void finish_average(void* dst, std::size_t count, DType dtype, int divisor);
  // Scratch memory in memory_space(), freed with the returned pointer,
  // aligned for any element type -- to alignof(std::max_align_t) at least
  // (the default: 64-byte aligned above 1 KiB; smaller blocks come from the
  // SmallPool) -- and never null where bytes are owed (bytes > 0 on a
  // transport that moves payloads). A device transport frees it in its
  // order: after the operations issued on it before the release.
  virtual std::shared_ptr<std::byte> allocate(std::size_t bytes);
};

// What is wrong with `p`, the block t.allocate(bytes) returned -- null where
// memory was owed, or not aligned for every element type -- or "" when
// nothing is. The core fails a transport whose allocate() breaks the
// contract so (a misaligned block computes right on x86 and faults, or is
// slow, elsewhere: it is caught here, not by a wrong value).
std::string allocation_fault(const Transport& t, const void* p, std::size_t bytes);

}  // namespace collie
