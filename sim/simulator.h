// Simulator: every rank of a job in one process, on one thread, in virtual
// time.
//
// One global event queue ordered by (virtual time, a tie-break key drawn from
// the seeded Prng, insertion order): events at the same instant run in an
// order the seed chooses, and the same seed always chooses the same order.
// Nothing here owns a thread or reads a real clock.
//
// The run's trace hash covers every delivered frame (time, endpoints, kind,
// context, tag, sequence numbers, size): same seed and program, same hash,
// on any machine.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <optional>
#include <vector>

#include "core/observer.h"
#include "core/transport.h"
#include "sim/deferred_memory.h"
#include "sim/event_queue.h"
#include "sim/explorer.h"
#include "sim/faults.h"
#include "sim/huge_pages.h"
#include "sim/network_model.h"
#include "sim/prng.h"
#include "sim/trace.h"

namespace collie::sim {

class Simulator final : public OpObserver {
 public:
  Simulator(int world_size, std::uint64_t seed, NetworkModel model, FaultPlan faults = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  int world_size() const { return world_size_; }
  std::uint64_t seed() const { return seed_; }
  const NetworkModel& model() const { return model_; }
  Transport& transport(int rank);

  // Runs events until done() holds (true) or the next event lies past
  // `deadline` (false; the clock then reads the deadline). Throws
  // Error(kDeadlock) when the queue empties first, Error(kUsage) when called
  // from inside an event.
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline);

  Nanos now() const { return now_; }
  // Virtual time of rank r's latest event.
  Nanos rank_clock(int r) const;
  std::uint64_t trace_hash() const { return hash_; }
  std::uint64_t events_processed() const { return events_; }
  std::uint64_t frames_delivered() const { return frames_; }
  std::uint64_t bytes_delivered() const { return bytes_; }

  const FaultPlan& faults() const { return plan_; }
  // What the fault plan did, in order.
  const std::vector<FaultRecord>& fault_log() const { return records_; }
  bool crashed(int r) const;
  // Rank r's clock (skewed if a ClockSkew says so) at global time t.
  Nanos local_time(int r, Nanos t) const;

  // Records a trace of the run from now on (ops, steps, faults, and the
  // messages posted from now on).
  void enable_trace();

  // Hands the run's scheduling choices to `e` (see explorer.h): time
  // collapses and delivery order is chosen, not drawn. Set before running.
  void set_explorer(Explorer* e) { explorer_ = e; }

  // Timing-only mode: payloads are not materialised. Tensors may have no
  // memory (data == nullptr): every rank's copy(), reduce() and
  // finish_average() do nothing, allocate() returns null, and data frames
  // (eager and rendezvous) are delivered with an empty payload. Everything
  // else is unchanged -- costs (header.bytes), matching, ordering, header
  // checks, faults, the trace hash -- so virtual times equal those of a
  // materialised run. Memory is O(ranks + frames in flight) whatever the
  // message sizes. Set before running.
  void set_timing_only(bool on) { timing_only_ = on; }
  bool timing_only() const { return timing_only_; }
  const TraceRecorder* trace() const { return trace_.get(); }

  // Deferred memory: the ranks' memory behaves as a device's (memory_space()
  // is kDevice, so the core never loads or stores it itself). Every rank's
  // copy(), reduce() and finish_average(), and the reading of an eager
  // payload, is logged and run at synchronize_memory(), column-blocked
  // (sim/deferred_memory.h says how and why that equals running each at
  // once). An eager send's payload is read from the sender's buffer when it
  // is delivered unless something writes those bytes first (then they are
  // copied, in the log, just before). Requires of the caller: the tensors
  // ops are given stay allocated, and host code neither reads nor writes
  // them, from the op's start until synchronize_memory() (SimWorld::run
  // calls it as it returns). Set before the ranks' communicators exist;
  // the simulator must outlive them (their scratch memory comes back here).
  void defer_memory(DeferredMemoryOptions options);
  bool defers_memory() const { return deferred_ != nullptr; }
  // Runs every logged memory operation (a no-op without deferred memory).
  void synchronize_memory();
  const DeferredMemory* deferred_memory() const { return deferred_.get(); }

  // OpObserver: crash faults that target ops and steps; the trace.
  void op_begin(int rank, std::uint64_t id, const OpInfo& info, Nanos now) override;
  void op_end(int rank, std::uint64_t id, const std::string& error, Nanos now) override;
  void step_begin(int rank, std::uint64_t id, const std::string& step, Nanos now) override;
  // Ends are only traced; steps are traced and targeted by crash faults.
  bool wants_op_end() const override { return trace_ != nullptr; }
  bool wants_steps() const override;

 private:
  class Endpoint;
  friend class Endpoint;
  // Worlds from this size on run with the heap on huge pages.
  static constexpr int kHugePagesFromRanks = 8192;
  // An Event's kind. Its ptr(): the coroutine (kResume) or the send cookie
  // (kSendComplete); its frame(): the slot in frames_in_flight_ (kDeliver)
  // or the crashed rank (kPeerLost). push() takes one or the other.
  enum class EventKind : std::uint8_t { kResume, kDeliver, kSendComplete, kCrash, kPeerLost };
  // A frame between its post and its delivery: two cache lines, the most a
  // delivery reads of it. Its eager payload's copy, in materialised runs,
  // sits in copies_[slot]; its trace record, in traced runs, in flows_[slot].
  struct alignas(64) InFlight {
    FrameHeader header;
    const std::byte* borrowed = nullptr;  // a large payload, read at delivery; null: copies_[slot] (or none)
    void* cookie = nullptr;               // the send that completes at delivery (large payloads), or null
  };
  struct Flow {
    std::uint64_t message_id = 0;  // for trace flow arrows; 0: posted before the trace began
    Nanos sent_at = 0;
  };

  void push(Nanos time, EventKind kind, int rank, void* ptr, std::uint32_t frame = 0);
  void post_send(int src, const FrameHeader& h, std::span<const std::byte> payload, void* cookie);
  // `plan_index`: the crash fault of plan_ that did it (its detection delay), or -1.
  void crash(int rank, const std::string& why, int plan_index = -1);
  // A free slot in frames_in_flight_ (reused, or a new one).
  std::uint32_t alloc_frame();
  void record(FaultRecord::Kind kind, int src, int dst, const FrameHeader& h, const std::string& fault);
  double sample_delay_ns(const MessageFault& f);
  void schedule_after_compute(int rank, std::uint64_t bytes, std::coroutine_handle<> h);
  void process(const Event& e);
  void prefetch(const Event& e) const;
  // Staged prefetch over the current time's sorted batch (a hint only: it
  // reads the Endpoints it names and changes nothing).
  void prefetch_ahead();
  void mix(std::uint64_t v);

  const int world_size_;
  const std::uint64_t seed_;
  const NetworkModel model_;
  // cpu_bound: nodes run more ranks than cores (the model's time slicing).
  bool oversubscribed_ = false;
  Prng prng_;
  std::vector<Endpoint> endpoints_;  // by rank; never reallocated (transport() hands out references)
  Endpoint& ep(int rank);
  const Endpoint& ep(int rank) const;
  EventQueue queue_;
  std::uint64_t order_ = 0;
  Nanos now_ = 0;
  std::vector<std::vector<Nanos>> core_free_;  // cpu_bound with cores_per_node: per node, per core
  // cpu_bound: the earliest start at or after `t` of a `dur`-long job on
  // rank r's node (taking the core that frees first).
  Nanos claim_core(int rank, Nanos t, Nanos dur);
  std::vector<InFlight> frames_in_flight_;  // reserved for one frame per rank
  std::vector<std::uint32_t> free_frames_;  // reused last freed first (its lines are the warmest)
  std::vector<std::vector<std::byte>> copies_;  // by slot: eager payloads (materialised runs)
  // The payload being delivered: swapped with its slot's copy, so that the
  // buffers go round between the slots and this one instead of being made
  // and freed per message.
  std::vector<std::byte> delivering_;
  std::vector<Flow> flows_;                     // by slot: traced runs
  // Fills slot's payload copy and trace record (each only where needed).
  void keep(std::uint32_t slot, std::span<const std::byte> copy, Nanos sent_at);
  std::uint64_t hash_ = 1469598103934665603ull;
  std::uint64_t events_ = 0, frames_ = 0, bytes_ = 0;
  bool running_ = false;
  FaultPlan plan_;
  std::vector<std::string> fault_names_;  // plan_.describe(), for records
  bool out_of_cache(const FrameHeader& h) const;
  struct Skew {
    double rate = 1.0;
    double offset_ns = 0.0;
  };
  std::vector<Skew> skews_;  // by rank; empty when no rank's clock is skewed
  std::map<std::tuple<std::size_t, int, int>, std::uint64_t> nth_counts_;
  std::vector<FaultRecord> records_;
  std::unique_ptr<TraceRecorder> trace_;
  std::uint64_t next_message_id_ = 1;
  Explorer* explorer_ = nullptr;
  bool timing_only_ = false;
  bool pop_explored(Event& out);
  // Deferred memory (defer_memory()): the log, and the eager payloads still
  // read from their senders' buffers (by address: end, slot).
  struct Snapshot {
    std::uintptr_t end;
    std::uint32_t slot;
  };
  std::unique_ptr<DeferredMemory> deferred_;
  std::multimap<std::uintptr_t, Snapshot> snapshots_;
  std::vector<std::shared_ptr<std::byte>> materialized_;  // by slot: a snapshot's own copy, once made
  // Before a logged write of [dst, dst + bytes): each eager payload still
  // read from there gets its own copy first. Snapshots are at most the
  // eager threshold long (a duplicated frame's copy is made at once).
  void before_write(const void* dst, std::size_t bytes);
  void materialize(std::multimap<std::uintptr_t, Snapshot>::iterator it);
  std::multimap<std::uintptr_t, Snapshot>::iterator track_snapshot(std::uint32_t slot, const std::byte* src,
                                                                   std::size_t bytes);
  // Frees `memory` (the core's scratch) once the log no longer needs it.
  void release_deferred(std::shared_ptr<std::byte> memory, std::size_t bytes);
  // Large worlds: the heap on transparent huge pages (sim/huge_pages.h).
  std::unique_ptr<HeapHugePages> huge_pages_;
};

}  // namespace collie::sim
