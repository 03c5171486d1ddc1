#include "backends/cuda/staging.h"

#include <string>

#include "core/error.h"

namespace collie::cuda {

namespace {

// `host` and `device` are views of the spaces their names say, alike in dtype and count.
void check_pair(const char* call, TensorView host, TensorView device) {
  auto bad = [&](const std::string& why) { throw Error(ErrorKind::kInvalidArgument, OpContext{}, std::string(call) + ": " + why); };
  if (host.space != MemorySpace::kHost) bad("the host tensor is a device view");
  if (device.space != MemorySpace::kDevice) bad("the device tensor is a host view");
  if (host.dtype != device.dtype || host.count != device.count)
    bad("the host tensor is " + std::string(dtype_name(host.dtype)) + " x " + std::to_string(host.count) +
        " but the device tensor is " + std::string(dtype_name(device.dtype)) + " x " + std::to_string(device.count));
}

}  // namespace

DeviceTensor::DeviceTensor(CudaWorld& world, int rank, DType dtype, std::size_t count)
    : memory_(world.allocate(rank, count * dtype_size(dtype))), dtype_(dtype), count_(count) {}

DeviceTensor to_device(CudaWorld& world, int rank, TensorView host) {
  DeviceTensor d(world, rank, host.dtype, host.count);
  copy_to_device(world, rank, host, d.view());
  return d;
}

void copy_to_device(CudaWorld& world, int rank, TensorView host, TensorView device) {
  check_pair("copy_to_device", host, device);
  if (host.bytes()) world.runtime().copy(device.data, host.data, host.bytes(), world.stream(rank));
}

void copy_to_host(CudaWorld& world, int rank, TensorView device, TensorView host) {
  check_pair("copy_to_host", host, device);
  if (host.bytes()) world.runtime().copy(host.data, device.data, host.bytes(), world.stream(rank));
}

Tensor to_host(CudaWorld& world, int rank, TensorView device) {
  Tensor t(device.dtype, {static_cast<std::int64_t>(device.count)});
  copy_to_host(world, rank, device, t.view());
  return t;
}

}  // namespace collie::cuda
