// CudaRuntime: the device runtime contract (device_runtime.h) over the CUDA
// runtime API, built when nvcc is present. Memory is stream-ordered
// (cudaMallocAsync / cudaFreeAsync on each device's default pool), copies
// are cudaMemcpyAsync with unified addressing, the reductions are the
// kernels of reduce_kernels.h, events are cudaEvents without timing, and
// enable_peer_access() both enables peer access and grants the device
// access to the peer's default pool (pool memory needs both). Nothing
// synchronises a whole device: a copy to host memory waits for its own
// stream only, through an event.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backends/cuda/device_runtime.h"

namespace collie::cuda {

// Why no CUDA device is usable here ("no CUDA device: <the driver's
// words>"), or nullopt when one is.
std::optional<std::string> cuda_unavailable();

class CudaRuntime final : public DeviceRuntime {
 public:
  // Throws Error(kTransport) with cuda_unavailable()'s words when no device is usable.
  CudaRuntime();
  ~CudaRuntime() override;  // destroys its streams and events (device memory is the caller's)
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace collie::cuda
