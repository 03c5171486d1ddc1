// The CUDA backends as the registry sees them: names, availability, and a
// factory that builds an N-rank CudaWorld (cuda_transport.h) over a runtime.
//
//   cuda                    CudaRuntime: the GPUs present, ranks round-robin
//   cuda:host               HostRuntime (seeded by the run's seed), 2 simulated
//                           devices with peer access: the CUDA transport's
//                           every path on any machine, no nvcc needed
//   cuda:host:BUG           a broken HostRuntime, one bug each (early_event,
//                           wrong_stream_copy, reduce_skips_wait,
//                           free_while_in_use): each must fail conformance
//
// Ranks take device tensors only; a scenario's host tensors are staged to
// the device and back around each op (staging.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/backend_info.h"
#include "backends/cuda/cuda_transport.h"
#include "backends/cuda/host_runtime.h"

namespace collie::cuda {

enum class RuntimeKind : std::uint8_t { kCuda, kHost };

struct CudaBackendSpec {
  RuntimeKind runtime = RuntimeKind::kCuda;
  // RuntimeKind::kHost only:
  HostRuntimeBug bug = HostRuntimeBug::kNone;
  int host_devices = 2;
  bool host_peer_access = true;
  // Tests only: a deliberately broken transport.
  TransportBug transport_bug = TransportBug::kNone;
};

// The spec a backend name stands for; nullopt when it is none of ours.
std::optional<CudaBackendSpec> parse_cuda_backend(std::string_view name);
// Every name parse_cuda_backend() takes, "cuda" first.
std::vector<std::string> cuda_backend_names();
std::string cuda_backend_description(const CudaBackendSpec& spec);
// Why `spec` cannot run here ("collie was built without CUDA (no nvcc ...)",
// "no CUDA device: <the driver's words>"); nullopt when it can.
std::optional<std::string> cuda_backend_unavailable(const CudaBackendSpec& spec);
// A world of options.world_size ranks over a new runtime of spec.runtime;
// HostRuntime is seeded with options.seed. Throws Error(kUsage) where
// cuda_backend_unavailable() says why not.
std::unique_ptr<CudaWorld> make_cuda_backend(const CudaBackendSpec& spec, const BackendOptions& options);

// The rate of the runtime's own device-to-device copies of `bytes` on
// device 0 (the ceiling a rank's bus bandwidth is read against), in 10^9
// bytes per second of the host's clock: `iters` copies queued on one
// stream, then one synchronisation. Throws as make_cuda_backend().
double device_copy_rate_GBps(const CudaBackendSpec& spec, std::size_t bytes, int iters, std::uint64_t seed);

// Every backend above as the registry lists it (backends/builtin_backends.cpp).
std::vector<BackendInfo> make_cuda_backends();

}  // namespace collie::cuda
