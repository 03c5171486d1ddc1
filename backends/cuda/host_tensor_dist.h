// HostTensorDist: collie's core on one rank of a CudaWorld, taking host
// tensors. Every call (core/op.h) is staged as a value: each tensor of
// every slot, and of a batch's ops, is copied to the rank's device
// (staging.h), the call runs on the device copies, and its Work completes
// once the call has and every copy -- what the op wrote and what it should
// only have read -- is back in the host tensors, so the checks see what the
// device holds. What CudaWorld::host_tensor_dist() gives a job's rank
// programs (backends/backend.h).
#pragma once

#include "backends/cuda/cuda_transport.h"
#include "core/call_dist.h"
#include "core/communicator.h"
#include "core/task.h"

namespace collie::cuda {

class HostTensorDist final : public CallDist {
 public:
  // `rank` is a Communicator over `world`'s transport of its rank; both
  // outlive this.
  HostTensorDist(Communicator& rank, CudaWorld& world) : inner_(rank), world_(world) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  Executor& executor() override { return inner_.executor(); }
  Group world() const override { return inner_.world(); }
  Group new_group(std::vector<int> ranks, Nanos timeout_ns = 0, std::string name = {}) override {
    return inner_.new_group(std::move(ranks), timeout_ns, std::move(name));
  }
  void destroy_group(const Group& g) override { inner_.destroy_group(g); }
  std::vector<std::string> describe_pending() const override { return inner_.describe_pending(); }

 private:
  Work call(DistCall c) override;

  Communicator& inner_;
  CudaWorld& world_;
  SpawnRegistry copies_back_;
};

}  // namespace collie::cuda
