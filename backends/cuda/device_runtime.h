// The device runtime seam: everything the CUDA transport (cuda_transport.h)
// does to a device goes through this interface -- memory, copies, the
// reduction kernels, streams and events, peer access. Two implementations:
// CudaRuntime (cuda_runtime.h: the CUDA runtime API and the kernels of
// reduce_kernels.h, built when nvcc is present) and HostRuntime
// (host_runtime.h: the same contract on host memory, plain C++, with each
// stream's work run late and interleaved by a seed, so that a missing
// dependency gives a wrong value on any machine).
//
// Contract
// --------
// Threading: one host thread calls a runtime at a time. Nothing here calls
// back into the caller.
//
// Devices are numbered 0 .. device_count()-1. Device memory is addressed
// by plain pointers (CUDA's unified addressing): a pointer is device
// memory when device_of() says which device holds it, host memory
// otherwise. The host never loads or stores device memory itself; it goes
// through copy(). HostRuntime enforces this: a host access to its device
// memory outside the runtime is a fault it reports, naming the address.
//
// Streams: work queued on one stream (copy, reduce, finish_average, record,
// wait, free) runs in the order it was queued, asynchronously to the host
// and, unless ordered by events, in any interleaving with other streams'
// work. A stream belongs to one device and lives as long as the runtime.
//
// Events mark a point in a stream: record(e, s) captures the work queued on
// s so far; query(e) is true once all of it has finished (and for an event
// never recorded); wait(s, e) makes the work queued on s afterwards start
// only once the work captured by e's latest record *at the time of the
// call* has finished (recording e again later does not affect it). An event
// belongs to one device and is recorded on streams of that device only;
// any stream may wait for it.
//
// Kernels (reduce, finish_average) touch device memory only: of the
// stream's own device, or of a peer device once enable_peer_access(stream's
// device, peer) was called. copy() moves bytes between any two of host
// memory, device memory of any device.
//
// Errors: a call that fails, or that breaks this contract where the
// implementation can tell (a kernel on host memory, memory that was
// freed, an event recorded on another device's stream), throws
// collie::Error(kTransport) saying which call, on which stream, with which
// addresses. Work that fails while it runs (asynchronously) is reported by
// the next query() or synchronize(), and by every call after it: a failed
// runtime stays failed, as a CUDA context does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace collie::cuda {

// Handles the runtime gives out; compare with ==.
struct Stream {
  int id = -1;
  friend bool operator==(Stream, Stream) = default;
};
struct Event {
  int id = -1;
  friend bool operator==(Event, Event) = default;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // "cuda", "host", "host:early_event", ...: how reports name it.
  virtual std::string name() const = 0;

  // ---- devices -------------------------------------------------------------
  virtual int device_count() const = 0;
  // Whether kernels on `device` can be allowed to touch `peer`'s memory.
  virtual bool can_access_peer(int device, int peer) const = 0;
  // Allows kernels on `device` to touch `peer`'s memory from now on.
  // Requires can_access_peer(device, peer). Calling it twice is harmless.
  virtual void enable_peer_access(int device, int peer) = 0;

  // ---- memory --------------------------------------------------------------
  // `bytes` (> 0) of device memory on `stream`'s device, 256-byte aligned,
  // uninitialised, usable by work queued on `stream` from now on (and by
  // other streams once they wait for an event recorded on `stream` after
  // this call). Stream-ordered, as cudaMallocAsync.
  virtual void* allocate(std::size_t bytes, Stream stream) = 0;
  // Gives `p` (from allocate()) back once the work queued on `stream` before
  // this call has finished. Work on other streams that uses `p` must be
  // ordered before it (the stream waited for an event recorded after that
  // work). Stream-ordered, as cudaFreeAsync. Never throws: an error is
  // reported by the next call that can throw.
  virtual void free(void* p, Stream stream) noexcept = 0;
  // The device holding `p`, or -1 for host memory.
  virtual int device_of(const void* p) const = 0;

  // ---- streams and events --------------------------------------------------
  virtual Stream create_stream(int device) = 0;
  virtual int stream_device(Stream s) const = 0;
  virtual Event create_event(int device) = 0;
  // Requires: no wait() queued for it is still pending. Never throws.
  virtual void destroy_event(Event e) noexcept = 0;
  virtual void record(Event e, Stream s) = 0;
  // Does not block. True once the work e's latest record captured finished.
  virtual bool query(Event e) = 0;
  virtual void wait(Stream s, Event e) = 0;
  // Blocks the host until query(e) would be true.
  virtual void synchronize(Event e) = 0;

  // ---- work on a stream ----------------------------------------------------
  // Copies `bytes` bytes, in `s`'s order. A host source is read before the
  // call returns (the host may change it at once); a host destination is
  // written before the call returns (it waits for the work queued on `s`
  // before it). dst and src do not overlap.
  virtual void copy(void* dst, const void* src, std::size_t bytes, Stream s) = 0;
  // dst[i] = dst[i] op src[i] for i < count, with the arithmetic of
  // elementwise.h (the host reference's bits). Requires: the op is defined
  // for the dtype; AVG combines as SUM.
  virtual void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Stream s) = 0;
  // dst[i] /= divisor for the floating dtypes (AVG's last step); others are
  // left as they are.
  virtual void finish_average(void* dst, std::size_t count, DType dtype, int divisor, Stream s) = 0;
};

}  // namespace collie::cuda
