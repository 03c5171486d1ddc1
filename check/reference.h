// The reference oracle: every collective's semantics as a plain sequential
// computation over all ranks' tensors at once, written without any of the
// algorithms, the engine or the transport. Given each group member's inputs
// (indexed by group rank) it returns each member's expected outputs.
//
// Reductions combine in group-rank order, element by element, with the
// dtype's own rounding after each combination (integers wrap, bool is
// logical). Tests pick floating inputs whose results are exact in any order
// (as nccl-tests does), so any correct algorithm matches bit for bit.
#pragma once

#include <vector>

#include "core/reduce_op.h"
#include "core/tensor.h"

namespace collie::reference {

// The reduction of `in` (group-rank order) with `op`: what reduce leaves on
// its root and all_reduce everywhere, computed once.
Tensor reduction(const std::vector<const Tensor*>& in, ReduceOp op);

// The reduction of a power-of-two number of inputs combined pairwise, as
// a butterfly does: inputs `d` apart first for each d in `distances`
// (recursive doubling: 1, 2, 4, ...; recursive halving: n/2, ..., 1), so that
// where each combination rounds (float16, bfloat16) the result is the one
// bit pattern that tree gives. Not for AVG.
Tensor pairwise_reduction(const std::vector<const Tensor*>& in, ReduceOp op, const std::vector<std::size_t>& distances);

std::vector<Tensor> broadcast(const std::vector<Tensor>& in, int root);
// Non-root outputs equal their inputs.
std::vector<Tensor> reduce(const std::vector<Tensor>& in, int root, ReduceOp op);
std::vector<Tensor> all_reduce(const std::vector<Tensor>& in, ReduceOp op);
// out[i] = list[i] from the root's list; `shape_like` gives the output dtype/shape.
std::vector<Tensor> scatter(const std::vector<Tensor>& root_list);
// Only the root's list is filled: gather(...)[root][i] == in[i]; others empty.
std::vector<std::vector<Tensor>> gather(const std::vector<Tensor>& in, int root);
std::vector<std::vector<Tensor>> all_gather(const std::vector<Tensor>& in);
// in_lists[r]: group rank r's n input blocks; out[i] = the reduction of
// every rank's block i.
std::vector<Tensor> reduce_scatter(const std::vector<std::vector<Tensor>>& in_lists, ReduceOp op);
// in_lists[r][j]: what group rank r sends to j; out[i][j] = in_lists[j][i].
std::vector<std::vector<Tensor>> all_to_all(const std::vector<std::vector<Tensor>>& in_lists);

// A deep copy.
Tensor clone(const Tensor& t);
// Same dtype, count and bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b);

}  // namespace collie::reference
