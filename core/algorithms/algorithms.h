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

// all_gather's output: size() blocks shaped like the input, given as a list
// of tensors or as one tensor of size() * block_count elements.
class GatherBlocks {
 public:
  explicit GatherBlocks(std::vector<TensorView> list) : list_(std::move(list)) {}
  GatherBlocks(TensorView whole, std::size_t block_count) : whole_(whole), block_count_(block_count) {}
  TensorView operator[](int i) const;  // block i (contributed by group rank i)
  bool contiguous() const { return list_.empty(); }
  TensorView whole() const { return whole_; }  // when contiguous()

 private:
  std::vector<TensorView> list_;
  TensorView whole_;
  std::size_t block_count_ = 0;
};

// all_gather: block i of `out` receives group rank i's `in`.
Task<void> ring_all_gather(CollectiveContext& c, GatherBlocks out, TensorView in);
Task<void> bruck_all_gather(CollectiveContext& c, GatherBlocks out, TensorView in);

// scatter / gather: list is meaningful on the root only.
Task<void> linear_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> binomial_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> linear_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);
Task<void> binomial_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);

// barrier
Task<void> dissemination_barrier(CollectiveContext& c);

}  // namespace collie::algorithms
