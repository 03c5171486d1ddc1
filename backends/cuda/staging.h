// Device tensors of a CudaWorld's ranks, and the copies between them and
// host tensors: what a program written for host tensors needs to run on the
// CUDA transport, whose ranks take device tensors only. The staging wrapper
// (host tensors in, device tensors to the op, results back) builds on these
// and lives with the op dispatch; these stay apart from it.
//
// Every copy goes through the world's runtime on the rank's stream, so it is
// ordered with the rank's ops: a copy to the device is queued (the host
// tensor may change as soon as the call returns) and is seen by every op
// issued after it; a copy to the host returns once the host tensor holds
// what the rank's stream made of the device tensor by then.
#pragma once

#include <cstddef>
#include <memory>

#include "backends/cuda/cuda_transport.h"
#include "core/tensor.h"

namespace collie::cuda {

// `count` elements of `dtype` in `rank`'s device memory (uninitialised),
// released when the last copy of it goes (CudaWorld::allocate).
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(CudaWorld& world, int rank, DType dtype, std::size_t count);
  TensorView view() const { return TensorView{memory_.get(), dtype_, count_, MemorySpace::kDevice}; }
  operator TensorView() const { return view(); }  // NOLINT: usable wherever a view is
  DType dtype() const { return dtype_; }
  std::size_t count() const { return count_; }

 private:
  std::shared_ptr<std::byte> memory_;
  DType dtype_ = DType::kFloat32;
  std::size_t count_ = 0;
};

// A device copy of the host view `host` on `rank`.
DeviceTensor to_device(CudaWorld& world, int rank, TensorView host);
// Queues `host` into the device view `device` (same dtype and count).
void copy_to_device(CudaWorld& world, int rank, TensorView host, TensorView device);
// Copies the device view `device` into the host view `host` (same dtype and
// count); returns once `host` holds it.
void copy_to_host(CudaWorld& world, int rank, TensorView device, TensorView host);
// A new 1-D host tensor holding the device view's elements.
Tensor to_host(CudaWorld& world, int rank, TensorView device);

}  // namespace collie::cuda
