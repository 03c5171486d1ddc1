#include "backends/cuda/cuda_backend.h"

#include <chrono>

#include "core/error.h"

#if COLLIE_WITH_CUDA_RUNTIME
#include "backends/cuda/cuda_runtime.h"
#endif

namespace collie::cuda {

std::optional<CudaBackendSpec> parse_cuda_backend(std::string_view name) {
  CudaBackendSpec spec;
  if (name == "cuda") return spec;
  constexpr std::string_view kHost = "cuda:host";
  if (name.substr(0, kHost.size()) != kHost) return std::nullopt;
  spec.runtime = RuntimeKind::kHost;
  const std::string_view rest = name.substr(kHost.size());
  if (rest.empty()) return spec;
  if (rest.front() != ':') return std::nullopt;
  const auto bug = parse_host_runtime_bug(rest.substr(1));
  if (!bug || *bug == HostRuntimeBug::kNone) return std::nullopt;
  spec.bug = *bug;
  return spec;
}

std::vector<std::string> cuda_backend_names() {
  std::vector<std::string> names{"cuda", "cuda:host"};
  for (int b = 1; b < kNumHostRuntimeBugs; ++b)
    names.push_back("cuda:host:" + std::string(host_runtime_bug_name(static_cast<HostRuntimeBug>(b))));
  return names;
}

std::string cuda_backend_description(const CudaBackendSpec& spec) {
  if (spec.runtime == RuntimeKind::kCuda)
    return "collie's core over the CUDA transport on the GPUs present (ranks round-robin, one stream each)";
  switch (spec.bug) {
    case HostRuntimeBug::kNone:
      return "collie's core over the CUDA transport on HostRuntime: guarded host memory, streams run late in a "
             "seeded order (no GPU needed)";
    case HostRuntimeBug::kEarlyEvent: return "broken on purpose: an event completes before its work (must fail conformance)";
    case HostRuntimeBug::kWrongStreamCopy: return "broken on purpose: copies run on the wrong stream (must fail conformance)";
    case HostRuntimeBug::kReduceSkipsWait:
      return "broken on purpose: a reduction skips its stream's wait for its input (must fail conformance)";
    case HostRuntimeBug::kFreeWhileInUse:
      return "broken on purpose: memory is freed while queued work still uses it (must fail conformance)";
  }
  return "";
}

std::optional<std::string> cuda_backend_unavailable(const CudaBackendSpec& spec) {
  if (spec.runtime == RuntimeKind::kHost) return std::nullopt;
#if COLLIE_WITH_CUDA_RUNTIME
  return cuda_unavailable();
#else
  return std::string("collie was built without CUDA (no nvcc when it was configured); cuda:host needs none");
#endif
}

std::unique_ptr<CudaWorld> make_cuda_backend(const CudaBackendSpec& spec, const BackendOptions& options) {
  if (auto why = cuda_backend_unavailable(spec)) throw Error(ErrorKind::kUsage, OpContext{}, *why);
  std::unique_ptr<DeviceRuntime> runtime;
  if (spec.runtime == RuntimeKind::kHost) {
    HostRuntimeOptions ho;
    ho.seed = options.seed;
    ho.devices = spec.host_devices;
    ho.peer_access = spec.host_peer_access;
    ho.bug = spec.bug;
    runtime = std::make_unique<HostRuntime>(ho);
  } else {
#if COLLIE_WITH_CUDA_RUNTIME
    runtime = std::make_unique<CudaRuntime>();
#endif
  }
  CudaWorldOptions wo;
  wo.world_size = options.world_size;
  wo.bug = spec.transport_bug;
  return std::make_unique<CudaWorld>(std::move(runtime), wo);
}

double device_copy_rate_GBps(const CudaBackendSpec& spec, std::size_t bytes, int iters, std::uint64_t seed) {
  BackendOptions o;
  o.world_size = 1;
  o.seed = seed;
  const std::unique_ptr<CudaWorld> world = make_cuda_backend(spec, o);
  DeviceRuntime& rt = world->runtime();
  const Stream s = rt.create_stream(0);
  const Event done = rt.create_event(0);
  void* a = rt.allocate(bytes, s);
  void* b = rt.allocate(bytes, s);
  rt.copy(a, b, bytes, s);  // first touch, untimed
  rt.record(done, s);
  rt.synchronize(done);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) rt.copy(i % 2 ? a : b, i % 2 ? b : a, bytes, s);
  rt.record(done, s);
  rt.synchronize(done);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rt.free(a, s);
  rt.free(b, s);
  rt.record(done, s);
  rt.synchronize(done);
  rt.destroy_event(done);
  return seconds > 0 ? static_cast<double>(bytes) * iters / seconds / 1e9 : 0.0;
}

std::vector<BackendInfo> make_cuda_backends() {
  std::vector<BackendInfo> out;
  for (const std::string& name : cuda_backend_names()) {
    const CudaBackendSpec spec = *parse_cuda_backend(name);
    BackendInfo info;
    info.name = name;
    info.description = cuda_backend_description(spec);
    info.selection = "--backend " + name;
    info.unavailable = [spec] { return cuda_backend_unavailable(spec); };
    info.logical_clock = true;
    info.create = [spec](const BackendOptions& o) -> std::unique_ptr<InProcessBackend> {
      return make_cuda_backend(spec, o);
    };
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace collie::cuda
