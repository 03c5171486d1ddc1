// The CUDA reduction kernels: dst[i] = dst[i] op src[i] on device memory,
// for every dtype x ReduceOp the core supports, with the arithmetic of
// elementwise.h (the host reference's bits: tested on the host by
// elementwise_test.cpp, on a GPU by reduce_kernels_test.cpp).
//
// Written for bandwidth: grid-stride loops over aligned 16-byte vectors
// (one load of each operand, one store), the elements before the first
// aligned vector and after the last one done one by one. Nothing here
// synchronises: each launch is queued on `stream` and returns its launch
// error (cudaSuccess when queued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace collie::cuda {

// Queues dst = dst op src over `count` elements. dst and src may have any
// alignment (the vector path needs both at the same offset from 16 bytes;
// otherwise every element goes one by one). Requires: the op is defined
// for the dtype (reduce_op_unsupported() is empty).
cudaError_t launch_reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                          cudaStream_t stream);

// Queues AVG's last step: dst /= divisor, rounded to the dtype (floating
// dtypes only; others are left as they are).
cudaError_t launch_finish_average(void* dst, std::size_t count, DType dtype, int divisor, cudaStream_t stream);

}  // namespace collie::cuda
