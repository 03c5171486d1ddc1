#include "backends/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

#include "backends/cuda/reduce_kernels.h"
#include "core/error.h"

namespace collie::cuda {

std::optional<std::string> cuda_unavailable() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  if (n == 0) return std::string("no CUDA device: the driver reports none");
  return std::nullopt;
}

struct CudaRuntime::Impl {
  struct StreamState {
    cudaStream_t stream = nullptr;
    int device = 0;
    cudaEvent_t marker = nullptr;  // a copy to host memory waits for it
  };
  struct EventState {
    cudaEvent_t event = nullptr;
    int device = 0;
  };

  int devices = 0;
  int current = -1;  // the device last made current
  std::vector<StreamState> streams;
  std::vector<EventState> events;  // null event: a free slot
  std::vector<int> free_events;
  std::optional<Error> failed;     // sticky, as a CUDA context's errors are

  [[noreturn]] void fail(const std::string& call, cudaError_t e) {
    (void)cudaGetLastError();
    failed = Error(ErrorKind::kTransport, OpContext{}, "cuda runtime: " + call + " failed: " + cudaGetErrorName(e) +
                                                           " (" + cudaGetErrorString(e) + ")");
    throw *failed;
  }
  void check(cudaError_t e, const char* call) {
    if (e != cudaSuccess) fail(call, e);
  }
  void check_failed() const {
    if (failed) throw *failed;
  }
  void use(int device) {
    if (device == current) return;
    check(cudaSetDevice(device), "cudaSetDevice");
    current = device;
  }
  const StreamState& stream(Stream s) const {
    if (s.id < 0 || static_cast<std::size_t>(s.id) >= streams.size())
      throw Error(ErrorKind::kTransport, OpContext{}, "cuda runtime: stream " + std::to_string(s.id) + " does not exist");
    return streams[static_cast<std::size_t>(s.id)];
  }
  const EventState& event(Event e) const {
    if (e.id < 0 || static_cast<std::size_t>(e.id) >= events.size() || !events[static_cast<std::size_t>(e.id)].event)
      throw Error(ErrorKind::kTransport, OpContext{}, "cuda runtime: event " + std::to_string(e.id) + " does not exist");
    return events[static_cast<std::size_t>(e.id)];
  }
};

CudaRuntime::CudaRuntime() : impl_(std::make_unique<Impl>()) {
  if (auto why = cuda_unavailable()) throw Error(ErrorKind::kTransport, OpContext{}, *why);
  impl_->check(cudaGetDeviceCount(&impl_->devices), "cudaGetDeviceCount");
}

CudaRuntime::~CudaRuntime() {
  // Each on its own device, so that none makes a context on another.
  for (const auto& e : impl_->events)
    if (e.event && cudaSetDevice(e.device) == cudaSuccess) cudaEventDestroy(e.event);
  for (const auto& s : impl_->streams) {
    if (cudaSetDevice(s.device) != cudaSuccess) continue;
    cudaEventDestroy(s.marker);
    cudaStreamDestroy(s.stream);
  }
}

std::string CudaRuntime::name() const { return "cuda"; }
int CudaRuntime::device_count() const { return impl_->devices; }

bool CudaRuntime::can_access_peer(int device, int peer) const {
  int can = 0;
  if (device == peer || cudaDeviceCanAccessPeer(&can, device, peer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return can != 0;
}

void CudaRuntime::enable_peer_access(int device, int peer) {
  Impl& r = *impl_;
  r.check_failed();
  r.use(device);
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else r.check(e, "cudaDeviceEnablePeerAccess");
  // Stream-ordered allocations on `peer` come from its default pool, which
  // other devices reach only once the pool grants them access.
  cudaMemPool_t pool = nullptr;
  r.check(cudaDeviceGetDefaultMemPool(&pool, peer), "cudaDeviceGetDefaultMemPool");
  cudaMemAccessDesc access{};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = device;
  access.flags = cudaMemAccessFlagsProtReadWrite;
  r.check(cudaMemPoolSetAccess(pool, &access, 1), "cudaMemPoolSetAccess");
}

void* CudaRuntime::allocate(std::size_t bytes, Stream stream) {
  Impl& r = *impl_;
  r.check_failed();
  const Impl::StreamState& s = r.stream(stream);
  r.use(s.device);
  void* p = nullptr;
  r.check(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, s.stream), "cudaMallocAsync");
  return p;
}

void CudaRuntime::free(void* p, Stream stream) noexcept {
  Impl& r = *impl_;
  if (r.failed || stream.id < 0 || static_cast<std::size_t>(stream.id) >= r.streams.size()) return;
  const Impl::StreamState& s = r.streams[static_cast<std::size_t>(stream.id)];
  try {
    r.use(s.device);
    r.check(cudaFreeAsync(p, s.stream), "cudaFreeAsync");
  } catch (const Error&) {
    // r.failed holds it: the next call that can throw reports it.
  }
}

int CudaRuntime::device_of(const void* p) const {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

Stream CudaRuntime::create_stream(int device) {
  Impl& r = *impl_;
  r.check_failed();
  r.use(device);
  Impl::StreamState s;
  s.device = device;
  r.check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  r.check(cudaEventCreateWithFlags(&s.marker, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  r.streams.push_back(s);
  return Stream{static_cast<int>(r.streams.size()) - 1};
}

int CudaRuntime::stream_device(Stream s) const { return impl_->stream(s).device; }

Event CudaRuntime::create_event(int device) {
  Impl& r = *impl_;
  r.check_failed();
  r.use(device);
  Impl::EventState e;
  e.device = device;
  r.check(cudaEventCreateWithFlags(&e.event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (!r.free_events.empty()) {
    const int id = r.free_events.back();
    r.free_events.pop_back();
    r.events[static_cast<std::size_t>(id)] = e;
    return Event{id};
  }
  r.events.push_back(e);
  return Event{static_cast<int>(r.events.size()) - 1};
}

void CudaRuntime::destroy_event(Event e) noexcept {
  Impl& r = *impl_;
  if (e.id < 0 || static_cast<std::size_t>(e.id) >= r.events.size()) return;
  Impl::EventState& st = r.events[static_cast<std::size_t>(e.id)];
  if (!st.event) return;
  if (cudaSetDevice(st.device) == cudaSuccess) {
    r.current = st.device;
    cudaEventDestroy(st.event);
  }
  st.event = nullptr;
  r.free_events.push_back(e.id);
}

void CudaRuntime::record(Event e, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  const Impl::StreamState& st = r.stream(s);
  const Impl::EventState& ev = r.event(e);
  if (ev.device != st.device)
    throw Error(ErrorKind::kTransport, OpContext{},
                "cuda runtime: record of event " + std::to_string(e.id) + " (device " + std::to_string(ev.device) +
                    ") on stream " + std::to_string(s.id) + " (device " + std::to_string(st.device) +
                    "): an event is recorded on streams of its own device only");
  r.use(st.device);
  r.check(cudaEventRecord(ev.event, st.stream), "cudaEventRecord");
}

bool CudaRuntime::query(Event e) {
  Impl& r = *impl_;
  r.check_failed();
  const cudaError_t q = cudaEventQuery(r.event(e).event);
  if (q == cudaSuccess) return true;
  if (q == cudaErrorNotReady) return false;
  r.fail("cudaEventQuery", q);
}

void CudaRuntime::wait(Stream s, Event e) {
  Impl& r = *impl_;
  r.check_failed();
  r.check(cudaStreamWaitEvent(r.stream(s).stream, r.event(e).event, 0), "cudaStreamWaitEvent");
}

void CudaRuntime::synchronize(Event e) {
  Impl& r = *impl_;
  r.check_failed();
  r.check(cudaEventSynchronize(r.event(e).event), "cudaEventSynchronize");
}

void CudaRuntime::copy(void* dst, const void* src, std::size_t bytes, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  if (bytes == 0) return;
  const Impl::StreamState& st = r.stream(s);
  r.use(st.device);
  r.check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st.stream), "cudaMemcpyAsync");
  if (device_of(dst) >= 0) return;
  // To host memory: the bytes are there once this stream's work up to the
  // copy finished (its own stream only, never the whole device).
  r.check(cudaEventRecord(st.marker, st.stream), "cudaEventRecord");
  r.check(cudaEventSynchronize(st.marker), "cudaEventSynchronize");
}

void CudaRuntime::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  if (count == 0) return;
  const Impl::StreamState& st = r.stream(s);
  r.use(st.device);
  r.check(launch_reduce(dst, src, count, dtype, op, st.stream), "the reduction kernel's launch");
}

void CudaRuntime::finish_average(void* dst, std::size_t count, DType dtype, int divisor, Stream s) {
  Impl& r = *impl_;
  r.check_failed();
  if (count == 0) return;
  const Impl::StreamState& st = r.stream(s);
  r.use(st.device);
  r.check(launch_finish_average(dst, count, dtype, divisor, st.stream), "the average kernel's launch");
}

}  // namespace collie::cuda
