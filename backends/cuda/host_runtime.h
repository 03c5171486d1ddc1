// HostRuntime: the device runtime contract (device_runtime.h) on host
// memory, in plain C++, for proving a device transport on any machine.
//
// What makes it a test instrument rather than a slow GPU:
//   - Late work. Work queued on a stream does not run when queued. It runs
//     only as the host polls -- inside query() (a few steps, drawn from the
//     seed, often none) and synchronize() (until the event is done) -- one
//     operation at a time, each stream in its order, the next stream drawn
//     from a PRNG seeded with HostRuntimeOptions::seed. So a missing
//     wait(), a read before the copy that fills it, or a buffer reused
//     before the work reading it ran give a wrong value, deterministically
//     from the seed: the failing seed replays it.
//   - Guarded memory. Device memory comes from its own arena, a mapping
//     that is inaccessible (PROT_NONE) except while the runtime executes
//     one queued operation. A host load or store to it from anywhere else
//     (a core path that forgot the memory space) faults, and the fault is
//     reported on stderr as "host runtime: a host read of device memory at
//     0x... (arena offset N) outside the runtime" before the process aborts.
//   - Checked operations. Every operation's operands are resolved to their
//     allocations when queued; running one whose allocation was freed in
//     the meantime, a kernel on host memory or on a peer's memory without
//     peer access, an event recorded on another device's stream, are errors
//     naming the operation, its stream and the addresses (device_runtime.h:
//     Errors).
// Fresh allocations hold 0xCB bytes, freed memory 0xDD, so a read of either
// shows as a wrong value even where no check catches it.
//
// Deliberately broken variants (HostRuntimeOptions::bug), one bug each:
// the acceptance test of every check built on top (the transport's tests,
// conformance on cuda:host:BUG): each must fail.
//
// Not thread-safe (one host thread, as device_runtime.h says).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backends/cuda/device_runtime.h"

namespace collie::cuda {

enum class HostRuntimeBug : std::uint8_t {
  kNone = 0,
  kEarlyEvent,       // "early_event": record() completes the event at once, before the work it captures
  kWrongStreamCopy,  // "wrong_stream_copy": every copy is queued on the next stream, not the one given
  kReduceSkipsWait,  // "reduce_skips_wait": a reduction runs without waiting for the events its stream waits for
  kFreeWhileInUse,   // "free_while_in_use": free() releases the memory at once, while queued work still uses it
};
inline constexpr int kNumHostRuntimeBugs = 5;

// "none", "early_event", ...
std::string_view host_runtime_bug_name(HostRuntimeBug bug);
std::optional<HostRuntimeBug> parse_host_runtime_bug(std::string_view name);

struct HostRuntimeOptions {
  std::uint64_t seed = 1;  // every interleaving choice; nothing else is random
  int devices = 1;         // simulated devices
  bool peer_access = true; // can_access_peer() between distinct devices
  // Address space reserved for device memory (not committed until used).
  std::size_t arena_bytes = std::size_t{32} << 30;
  HostRuntimeBug bug = HostRuntimeBug::kNone;
};

// What HostRuntime has done so far (for tests and reports).
struct HostRuntimeStats {
  std::uint64_t queued = 0;      // operations queued on streams
  std::uint64_t executed = 0;    // of those, run
  std::uint64_t polls = 0;       // query() calls
  std::uint64_t idle_polls = 0;  // query() calls that ran nothing although work was queued
  std::uint64_t live_allocations = 0;
  std::size_t live_bytes = 0;
};

class HostRuntime final : public DeviceRuntime {
 public:
  explicit HostRuntime(const HostRuntimeOptions& options);
  ~HostRuntime() override;  // queued work is dropped, the arena unmapped
  HostRuntime(const HostRuntime&) = delete;
  HostRuntime& operator=(const HostRuntime&) = delete;

  std::string name() const override;
  int device_count() const override;
  bool can_access_peer(int device, int peer) const override;
  void enable_peer_access(int device, int peer) override;
  void* allocate(std::size_t bytes, Stream stream) override;
  void free(void* p, Stream stream) noexcept override;
  int device_of(const void* p) const override;
  Stream create_stream(int device) override;
  int stream_device(Stream s) const override;
  Event create_event(int device) override;
  void destroy_event(Event e) noexcept override;
  void record(Event e, Stream s) override;
  bool query(Event e) override;
  void wait(Stream s, Event e) override;
  void synchronize(Event e) override;
  void copy(void* dst, const void* src, std::size_t bytes, Stream s) override;
  void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Stream s) override;
  void finish_average(void* dst, std::size_t count, DType dtype, int divisor, Stream s) override;

  // Runs queued work until every stream is empty (a quiescent point).
  void drain();
  HostRuntimeStats stats() const;
  // Whether `p` lies in this runtime's arena (live or not).
  bool in_arena(const void* p) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace collie::cuda
