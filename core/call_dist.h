// CallDist: a Dist that handles every op as one value. Each method makes
// the DistCall of its op (core/op.h) and hands it to call(); an
// implementation that forwards or wraps calls -- the controller's
// RemoteDist, the CUDA backend's host-tensor staging -- writes call() once
// instead of one method per op, and a new op reaches it without a change.
#pragma once

#include "core/dist.h"
#include "core/op.h"

namespace collie {

class CallDist : public Dist {
 public:
  Work send(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns) override;
  Work isend(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) override;
  Work recv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns) override;
  Work irecv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns, Nanos poll_ns) override;
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
  Work barrier(const Group& g, CollectiveOptions o) override;
  Work monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) override;
  Work batch_isend_irecv(std::span<const P2POp> ops, const Group& g) override;

 protected:
  // Makes the call `c` (every field of its op set, as dispatch() reads them).
  virtual Work call(DistCall c) = 0;
};

}  // namespace collie
