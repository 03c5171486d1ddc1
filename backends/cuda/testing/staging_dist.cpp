#include "backends/cuda/testing/staging_dist.h"

namespace collie::cuda::testing {

namespace {

// Awaits the device op, copies every device tensor back, then completes `outer`.
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
  } catch (...) {  // the runtime failed: so does the op
    if (!err) err = std::current_exception();
  }
  outer->source = inner.source_rank();
  outer->not_member = inner.not_member();
  outer->finish(err);
}

std::vector<TensorView> with(std::initializer_list<TensorView> first, std::span<const TensorView> rest = {},
                             std::span<const TensorView> more = {}) {
  std::vector<TensorView> v(first);
  v.insert(v.end(), rest.begin(), rest.end());
  v.insert(v.end(), more.begin(), more.end());
  return v;
}

std::span<const TensorView> part(const std::vector<TensorView>& v, std::size_t first, std::size_t n) {
  return {v.data() + first, n};
}

}  // namespace

Work StagingDist::staged(std::vector<TensorView> host, const DeviceOp& op) {
  const int r = inner_.rank();
  std::vector<DeviceTensor> device;
  std::vector<TensorView> views;
  for (const TensorView& h : host) {
    device.push_back(to_device(world_, r, h));
    views.push_back(device.back().view());
  }
  Work inner = op(views);
  auto outer = std::make_shared<WorkState>();
  outer->executor = &inner_.executor();
  outer->info = inner.state()->info;
  outer->description = inner.state()->description;
  copies_back_.spawn(copy_back(std::move(inner), std::move(device), std::move(host), world_, r, outer));
  return Work(outer);
}

Work StagingDist::send(TensorView t, int dst, int tag, const Group& g) {
  return staged({t}, [&](const auto& d) { return inner_.send(d[0], dst, tag, g); });
}
Work StagingDist::isend(TensorView t, int dst, int tag, const Group& g) {
  return staged({t}, [&](const auto& d) { return inner_.isend(d[0], dst, tag, g); });
}
Work StagingDist::recv(TensorView t, int src, int tag, const Group& g) {
  return staged({t}, [&](const auto& d) { return inner_.recv(d[0], src, tag, g); });
}
Work StagingDist::irecv(TensorView t, int src, int tag, const Group& g) {
  return staged({t}, [&](const auto& d) { return inner_.irecv(d[0], src, tag, g); });
}
Work StagingDist::broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) {
  return staged({t}, [&](const auto& d) { return inner_.broadcast(d[0], src, g, o); });
}
Work StagingDist::reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) {
  return staged({t}, [&](const auto& d) { return inner_.reduce(d[0], dst, op, g, o); });
}
Work StagingDist::all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) {
  return staged({t}, [&](const auto& d) { return inner_.all_reduce(d[0], op, g, o); });
}
Work StagingDist::scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g,
                          CollectiveOptions o) {
  return staged(with({out}, list),
                [&](const auto& d) { return inner_.scatter(d[0], src, part(d, 1, list.size()), g, o); });
}
Work StagingDist::gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g,
                         CollectiveOptions o) {
  return staged(with({in}, list), [&](const auto& d) { return inner_.gather(d[0], dst, part(d, 1, list.size()), g, o); });
}
Work StagingDist::all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) {
  return staged(with({in}, list),
                [&](const auto& d) { return inner_.all_gather(part(d, 1, list.size()), d[0], g, o); });
}
Work StagingDist::all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) {
  return staged({out, in}, [&](const auto& d) { return inner_.all_gather_into_tensor(d[0], d[1], g, o); });
}
Work StagingDist::reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& g,
                                 CollectiveOptions o) {
  return staged(with({out}, list),
                [&](const auto& d) { return inner_.reduce_scatter(d[0], part(d, 1, list.size()), op, g, o); });
}
Work StagingDist::reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g,
                                        CollectiveOptions o) {
  return staged({out, in}, [&](const auto& d) { return inner_.reduce_scatter_tensor(d[0], d[1], op, g, o); });
}
Work StagingDist::all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& g,
                             CollectiveOptions o) {
  return staged(with({}, out, in), [&](const auto& d) {
    return inner_.all_to_all(part(d, 0, out.size()), part(d, out.size(), in.size()), g, o);
  });
}
Work StagingDist::all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                                    std::span<const std::size_t> in_splits, const Group& g, CollectiveOptions o) {
  return staged({out, in},
                [&](const auto& d) { return inner_.all_to_all_single(d[0], d[1], out_splits, in_splits, g, o); });
}

}  // namespace collie::cuda::testing
