// The CUDA reduction kernels on a GPU against the host reference, bit for
// bit: every dtype x ReduceOp, counts around the 16-byte vectors (0, 1, a
// vector, a vector and a tail, large), aligned and misaligned pointers.
// Skips, saying why, where no CUDA device is usable.
#include "backends/cuda/reduce_kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace collie::cuda {
namespace {

std::string no_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return {};
}

TEST(CudaKernels, EveryDtypeAndOpGivesTheHostReferencesBitsAtEveryAlignment) {
  if (const std::string why = no_device(); !why.empty()) GTEST_SKIP() << why;
  std::mt19937_64 rng(5);
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dt = static_cast<DType>(d);
    const std::size_t es = dtype_size(dt);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduce_op_unsupported(op, dt)) continue;
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, 16 / es, 16 / es + 3, std::size_t{100003}}) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // elements past a 256-byte boundary
          std::vector<std::byte> a((count + 1) * es), b((count + 1) * es);
          for (auto& x : a) x = static_cast<std::byte>(rng());
          for (auto& x : b) x = static_cast<std::byte>(rng());
          if (dt == DType::kBool)
            for (std::size_t i = 0; i < a.size(); ++i) a[i] &= std::byte{1}, b[i] &= std::byte{1};
          std::vector<std::byte> want = a;
          reduce_host(want.data() + offset * es, b.data() + offset * es, count, dt, op);
          void *da = nullptr, *db = nullptr;
          ASSERT_EQ(cudaMalloc(&da, a.size()), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&db, b.size()), cudaSuccess);
          cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice);
          ASSERT_EQ(launch_reduce(static_cast<std::byte*>(da) + offset * es, static_cast<std::byte*>(db) + offset * es,
                                  count, dt, op, nullptr),
                    cudaSuccess);
          std::vector<std::byte> got(a.size());
          ASSERT_EQ(cudaMemcpy(got.data(), da, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          cudaFree(da);
          cudaFree(db);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
              << dtype_name(dt) << " " << reduce_op_name(op) << " count " << count << " offset " << offset;
        }
      }
    }
  }
}

}  // namespace
}  // namespace collie::cuda
