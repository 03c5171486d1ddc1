// The CUDA transport: core/transport.h over a DeviceRuntime (device_runtime.h),
// for N ranks of a job in this process, driven by one host thread.
//
// Placement: rank r runs on device r % device_count() (the whole suite runs
// on one GPU), with its own stream; peer access is enabled between the
// devices in use wherever the runtime allows it. Every rank's tensors are
// device memory (memory_space() is kDevice): the core reaches them only
// through post_send() and the memory operations below, which queue work on
// the rank's stream and return at once.
//
// A frame's journey (src -> dst):
//   post_send   records an event `ready` on src's stream: the payload is
//               what src's stream has made of it by then.
//   delivery    (the world's FIFO queue, so frames of a pair arrive in
//               order) dst's stream waits for `ready`, then either
//                 - lands the payload: landing_zone() names dst's receive
//                   buffer, the bytes go there by a copy, or a reduction
//                   kernel (dst = dst op payload), queued on dst's stream; or
//                 - hands it over: on_frame(payload) with the payload still in
//                   src's memory, and the core queues its copy, reduction or
//                   stored copy on dst's stream (through this transport);
//               then records an event `done` on dst's stream.
//   completion  once `done` has completed (polled, never a device-wide
//               synchronisation): a landed frame's on_frame(), and src's
//               on_send_complete() -- the payload's reader has run, so src
//               may reuse it.
// Control frames and empty payloads go through the same queue without
// device work. A NACK's payload is host text, copied at post_send.
//
// Executor: one FIFO queue for every rank (resumptions, deliveries,
// completions, losses) and the device work in flight. run_until() pops the
// queue, polls the in-flight events between items, and when only device
// work is left waits for the oldest; timers fire when nothing else can
// happen (the clock, a count of events, then jumps to them); with nothing
// at all left it throws kDeadlock. The clock is logical, so a run on
// HostRuntime is a function of its seed.
//
// Memory released by a rank (allocate()'s scratch, DeviceTensors) goes back
// to the runtime, in the rank's stream order, only once every payload the
// rank posted before the release has arrived (been read): an op that failed
// with sends in flight never frees memory under their reader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/device_runtime.h"

namespace collie::cuda {

// Deliberate transport bugs, for the tests that prove HostRuntime exposes
// them (the runtime's own bugs are HostRuntimeBug).
enum class TransportBug : std::uint8_t {
  kNone = 0,
  kSkipsPeerWait,        // dst's stream reads a payload without waiting for src's `ready` event
  kCompletesSendsEarly,  // a send completes once its reader is queued, before it has run
};

struct CudaWorldOptions {
  int world_size = 1;
  TransportBug bug = TransportBug::kNone;
};

class CudaWorld final : public InProcessBackend {
 public:
  // Requires: every Communicator over these transports, and every buffer
  // from allocate(), is gone before this world is destroyed.
  CudaWorld(std::unique_ptr<DeviceRuntime> runtime, const CudaWorldOptions& options);
  ~CudaWorld() override;
  CudaWorld(const CudaWorld&) = delete;
  CudaWorld& operator=(const CudaWorld&) = delete;

  Transport& transport(int rank) override;
  std::uint64_t events() const override;
  bool can_crash() const override { return true; }
  void crash(int rank, const std::string& why) override;
  bool crashed(int rank) const override;
  // Ranks take device tensors only: rank programs get a HostTensorDist
  // (host_tensor_dist.h) over their Communicator.
  std::unique_ptr<Dist> host_tensor_dist(Communicator& rank) override;

  int world_size() const;
  DeviceRuntime& runtime();
  int device(int rank) const;
  Stream stream(int rank) const;
  // `bytes` of device memory for `rank`, usable in its stream's order and
  // released as the class comment says (transport(rank).allocate() is this).
  std::shared_ptr<std::byte> allocate(int rank, std::size_t bytes);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace collie::cuda
