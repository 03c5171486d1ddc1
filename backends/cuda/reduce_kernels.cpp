#include "backends/cuda/reduce_kernels.h"

#include "backends/cuda/kernel_launch.h"

namespace collie::cuda {

// The codes are the enums' values (reduce_kernels.cu lists them in order).
static_assert(static_cast<int>(DType::kFloat16) == 0 && static_cast<int>(DType::kBool) == 8);
static_assert(static_cast<int>(ReduceOp::kSum) == 0 && static_cast<int>(ReduceOp::kAvg) == 7);

cudaError_t launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                          cudaStream_t stream) {
  return launch_reduce_code(dst, src, count, static_cast<int>(dtype), static_cast<int>(op), stream);
}

cudaError_t launch_finish_average(void* dst, std::size_t count, DType dtype, int divisor, cudaStream_t stream) {
  return launch_finish_average_code(dst, count, static_cast<int>(dtype), divisor, stream);
}

}  // namespace collie::cuda
