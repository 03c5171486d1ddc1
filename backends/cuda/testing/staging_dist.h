// StagingDist: a Dist over one rank's Communicator on a CudaWorld that takes
// host tensors, as the checks (conformance/collective_check.h) write them:
// each op's tensors are copied to the rank's device (staging.h), the op runs
// on the device copies, and its Work completes once the op has and every
// tensor has been copied back. Test support: it lets the property harness
// check the CUDA transport through collie's core today; the staging wrapper
// around the op dispatch is its successor.
#pragma once

#include <functional>
#include <vector>

#include "backends/cuda/staging.h"
#include "core/communicator.h"
#include "core/dist.h"

namespace collie::cuda::testing {

class StagingDist final : public Dist {
 public:
  StagingDist(Communicator& inner, CudaWorld& world) : inner_(inner), world_(world) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  Executor& executor() override { return inner_.executor(); }
  Group world() const override { return inner_.world(); }
  Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) override {
    return inner_.new_group(std::move(ranks), timeout_ns, std::move(name));
  }

  Work send(TensorView t, int dst, int tag, const Group& g) override;
  Work isend(TensorView t, int dst, int tag, const Group& g) override;
  Work recv(TensorView t, int src, int tag, const Group& g) override;
  Work irecv(TensorView t, int src, int tag, const Group& g) override;
  Work broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) override;
  Work reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g,
               CollectiveOptions o) override;
  Work gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g, CollectiveOptions o) override;
  Work all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) override;
  Work all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) override;
  Work reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& g,
                      CollectiveOptions o) override;
  Work reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g, CollectiveOptions o) override;
  Work all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& g,
                  CollectiveOptions o) override;
  Work all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                         std::span<const std::size_t> in_splits, const Group& g, CollectiveOptions o) override;
  Work barrier(const Group& g, CollectiveOptions o) override { return inner_.barrier(g, o); }
  std::vector<std::string> describe_pending() const override { return inner_.describe_pending(); }

 private:
  using DeviceOp = std::function<Work(const std::vector<TensorView>&)>;
  // Stages `host` to the device, runs `op` on the device views (in order),
  // and returns a Work that completes as the op's does, after every tensor
  // was copied back into `host`.
  Work staged(std::vector<TensorView> host, const DeviceOp& op);

  Communicator& inner_;
  CudaWorld& world_;
  SpawnRegistry copies_back_;
};

}  // namespace collie::cuda::testing
