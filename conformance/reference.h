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

std::vector<Tensor> broadcast(const std::vector<Tensor>& in, int root);
// Non-root outputs equal their inputs.
std::vector<Tensor> reduce(const std::vector<Tensor>& in, int root, ReduceOp op);
std::vector<Tensor> all_reduce(const std::vector<Tensor>& in, ReduceOp op);
// out[i] = list[i] from the root's list; `shape_like` gives the output dtype/shape.
std::vector<Tensor> scatter(const std::vector<Tensor>& root_list);
// Only the root's list is filled: gather(...)[root][i] == in[i]; others empty.
std::vector<std::vector<Tensor>> gather(const std::vector<Tensor>& in, int root);
std::vector<std::vector<Tensor>> all_gather(const std::vector<Tensor>& in);

// A deep copy.
Tensor clone(const Tensor& t);
// Same dtype, count and bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b);

}  // namespace collie::reference
