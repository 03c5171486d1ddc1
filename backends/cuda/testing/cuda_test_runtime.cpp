// The CUDA transport's tests on CudaRuntime (testing/cuda_job.h): the GPU
// bundle's cuda_transport_gpu_test. HostRuntimeOptions are ignored.
#include "backends/cuda/cuda_runtime.h"
#include "backends/cuda/testing/cuda_job.h"

namespace collie::cuda::testing {

std::unique_ptr<DeviceRuntime> make_test_runtime(const HostRuntimeOptions&) { return std::make_unique<CudaRuntime>(); }
std::optional<std::string> test_runtime_unavailable() { return cuda_unavailable(); }
bool on_host_runtime() { return false; }

}  // namespace collie::cuda::testing
