// The collective algorithms. Each is a coroutine over a CollectiveContext;
// roots are group ranks. AVG is handled by the caller (these combine it as
// SUM); the caller divides once on the ranks that hold the final sum.
#pragma once

#include <cstddef>
#include <vector>

#include "core/algorithms/collective_context.h"

namespace collie::algorithms {

// all_reduce
Task<void> ring_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op, std::size_t segment_bytes);
Task<void> recursive_doubling_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op);
Task<void> halving_doubling_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op);

// broadcast
Task<void> binomial_broadcast(CollectiveContext& c, TensorView t, int root);
Task<void> linear_broadcast(CollectiveContext& c, TensorView t, int root);

// reduce: only the root's tensor changes.
Task<void> binomial_reduce(CollectiveContext& c, TensorView t, int root, ReduceOp op);
Task<void> linear_reduce(CollectiveContext& c, TensorView t, int root, ReduceOp op);

// size() blocks of one shape, given as a list of tensors or as one tensor of
// size() * block_count elements: all_gather's output, reduce_scatter's input.
class Blocks {
 public:
  explicit Blocks(std::vector<TensorView> list) : list_(std::move(list)) {}
  Blocks(TensorView whole, std::size_t block_count) : whole_(whole), block_count_(block_count) {}
  TensorView operator[](int i) const;  // block i (of group rank i)
  bool contiguous() const { return list_.empty(); }
  TensorView whole() const { return whole_; }  // when contiguous()

 private:
  std::vector<TensorView> list_;
  TensorView whole_;
  std::size_t block_count_ = 0;
};

// all_gather: block i of `out` receives group rank i's `in`.
Task<void> ring_all_gather(CollectiveContext& c, Blocks out, TensorView in);
Task<void> bruck_all_gather(CollectiveContext& c, Blocks out, TensorView in);

// scatter / gather: list is meaningful on the root only.
Task<void> linear_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> binomial_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> linear_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);
Task<void> binomial_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);

// reduce_scatter: `out` on group rank i receives the reduction of every
// rank's block i of `in` (which is only read).
// Ring: n-1 steps around r -> r+1 over a copy of the input, each block sent
// in segments of at most segment_bytes so that forwarding overlaps receiving.
Task<void> ring_reduce_scatter(CollectiveContext& c, TensorView out, Blocks in, ReduceOp op,
                               std::size_t segment_bytes);
// Pairwise: every rank sends block j straight to rank j (all n-1 at once)
// and combines what it receives in group-rank order.
Task<void> pairwise_reduce_scatter(CollectiveContext& c, TensorView out, Blocks in, ReduceOp op);

// all_to_all: out[j] on group rank i receives in[i] of group rank j; the
// blocks may differ in size (each pair's sizes agree).
// Pairwise: step s (1..n-1) sends to r+s and receives from r-s.
Task<void> pairwise_all_to_all(CollectiveContext& c, std::vector<TensorView> out, std::vector<TensorView> in);
// Bruck: ceil(log2 n) steps; every block must have the same count.
Task<void> bruck_all_to_all(CollectiveContext& c, std::vector<TensorView> out, std::vector<TensorView> in);

// barrier
Task<void> dissemination_barrier(CollectiveContext& c);
// monitored_barrier: group rank 0 receives an empty message from every
// other member (all posted at once, in the phase kMonitorWaitsPhase), then
// releases each with one; the op's timeout bounds the wait.
inline constexpr const char* kMonitorWaitsPhase = "wait for arrivals";
Task<void> monitored_barrier(CollectiveContext& c);

}  // namespace collie::algorithms
