// CudaRuntime against the device runtime contract (testing/runtime_contract.h)
// on a GPU. Where no CUDA device is usable every test skips, saying why in
// the driver's words ("no CUDA device: ..."); scripts/gpu_check.sh runs it
// where one is.
#include "backends/cuda/cuda_runtime.h"

#include <gtest/gtest.h>

#include "backends/cuda/testing/runtime_contract.h"
#include "core/error.h"

namespace collie::cuda {
namespace {

using contract::RuntimeContract;

contract::RuntimeFactory cuda_factory() {
  return {"cuda", [](std::string* why) -> std::unique_ptr<DeviceRuntime> {
            if (auto no = cuda_unavailable()) {
              *why = *no;
              return nullptr;
            }
            return std::make_unique<CudaRuntime>();
          }};
}
INSTANTIATE_TEST_SUITE_P(Cuda, RuntimeContract, testing::Values(cuda_factory()),
                         [](const auto& p) { return p.param.label; });

TEST(CudaRuntime, SaysWhyNoDeviceIsUsableOrMakesOne) {
  if (auto why = cuda_unavailable()) {
    EXPECT_EQ(why->rfind("no CUDA device: ", 0), 0u) << *why;
    EXPECT_THROW(CudaRuntime(), Error);
    GTEST_SKIP() << *why;
  }
  CudaRuntime rt;
  EXPECT_GE(rt.device_count(), 1);
  EXPECT_EQ(rt.name(), "cuda");
}

}  // namespace
}  // namespace collie::cuda
