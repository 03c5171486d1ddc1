// The kernels' launch entry points as nvcc compiles them: dtypes and ops as
// the integer values of collie::DType and collie::ReduceOp (this header and
// reduce_kernels.cu include nothing of the core, whose headers need C++20
// where CMake 3.25 can ask nvcc for C++17 only). Call them through
// reduce_kernels.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace collie::cuda {

cudaError_t launch_reduce_code(void* dst, const void* src, std::size_t count, int dtype, int op, cudaStream_t stream);
cudaError_t launch_finish_average_code(void* dst, std::size_t count, int dtype, int divisor, cudaStream_t stream);

}  // namespace collie::cuda
