// The CUDA transport's tests on HostRuntime (testing/cuda_job.h).
#include "backends/cuda/testing/cuda_job.h"

namespace collie::cuda::testing {

std::unique_ptr<DeviceRuntime> make_test_runtime(const HostRuntimeOptions& options) {
  return std::make_unique<HostRuntime>(options);
}
std::optional<std::string> test_runtime_unavailable() { return std::nullopt; }
bool on_host_runtime() { return true; }

}  // namespace collie::cuda::testing
