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

// all_gather: out has size() entries shaped like in.
Task<void> ring_all_gather(CollectiveContext& c, std::vector<TensorView> out, TensorView in);

// scatter / gather: list is meaningful on the root only.
Task<void> linear_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> binomial_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root);
Task<void> linear_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);
Task<void> binomial_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root);

// barrier
Task<void> dissemination_barrier(CollectiveContext& c);

}  // namespace collie::algorithms
