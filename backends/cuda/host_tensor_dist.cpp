#include "backends/cuda/host_tensor_dist.h"

#include "backends/cuda/staging.h"

namespace collie::cuda {

namespace {

// Awaits the device call, copies every device tensor back, then completes
// `outer` as the call completed (its error, source and membership).
Spawned copy_back(Work inner, std::vector<DeviceTensor> device, std::vector<TensorView> host, CudaWorld& world,
                  int rank, std::shared_ptr<WorkState> outer) {
  std::exception_ptr err;
  try {
    co_await inner;
  } catch (...) {
    err = std::current_exception();
  }
  try {
    for (std::size_t i = 0; i < host.size(); ++i) copy_to_host(world, rank, device[i].view(), host[i]);
  } catch (...) {  // the runtime failed: so does the call
    if (!err) err = std::current_exception();
  }
  outer->source = inner.source_rank();
  outer->not_member = inner.not_member();
  outer->finish(err);
}

}  // namespace

Work HostTensorDist::call(DistCall c) {
  const int r = inner_.rank();
  std::vector<TensorView> host;
  std::vector<DeviceTensor> device;
  auto stage = [&](TensorView& v) {
    if (v.space != MemorySpace::kHost) return;  // already the device's
    host.push_back(v);
    device.push_back(to_device(world_, r, v));
    v = device.back().view();
  };
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    if (!c.spec().operand(slot).present()) continue;
    std::vector<TensorView> views = c.views(slot);
    for (TensorView& v : views) stage(v);
    c.set_views(slot, std::move(views));
  }
  for (P2POp& op : c.p2p) stage(op.tensor);
  Work inner = dispatch(inner_, c);
  auto outer = std::make_shared<WorkState>();
  outer->executor = &inner_.executor();
  outer->info = inner.state()->info;
  outer->description = inner.state()->description;
  copies_back_.spawn(copy_back(std::move(inner), std::move(device), std::move(host), world_, r, outer));
  return Work(outer);
}

std::unique_ptr<Dist> CudaWorld::host_tensor_dist(Communicator& rank) {
  return std::make_unique<HostTensorDist>(rank, *this);
}

}  // namespace collie::cuda
