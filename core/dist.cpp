#include "core/dist.h"

#include "core/error.h"

namespace collie {

std::vector<TensorView> split_blocks(TensorView t, std::span<const std::size_t> splits, std::size_t n,
                                     const std::string& what, const std::string& group_name) {
  const std::string splits_name = what + "_split_sizes";
  const std::string tensor = std::string(dtype_name(t.dtype)) + " x " + std::to_string(t.count);
  std::vector<TensorView> blocks;
  if (splits.empty()) {
    if (n == 0 || t.count % n != 0)
      throw std::invalid_argument("the " + what + " tensor is " + tensor + ", which does not divide into " +
                                  std::to_string(n) + " equal blocks (one per rank of " + group_name + "); pass " +
                                  splits_name);
    for (std::size_t i = 0; i < n; ++i) blocks.push_back(t.slice(i * (t.count / n), t.count / n));
    return blocks;
  }
  if (splits.size() != n)
    throw std::invalid_argument(splits_name + " has " + std::to_string(splits.size()) + " sizes but " + group_name +
                                " has " + std::to_string(n) + " ranks");
  std::size_t at = 0;
  for (std::size_t s : splits) {
    if (s > t.count - at)
      throw std::invalid_argument(splits_name + " add up to more than the " + what + " tensor's " +
                                  std::to_string(t.count) + " elements");
    blocks.push_back(t.slice(at, s));
    at += s;
  }
  if (at != t.count)
    throw std::invalid_argument(splits_name + " add up to " + std::to_string(at) + " but the " + what + " tensor has " +
                                std::to_string(t.count) + " elements");
  return blocks;
}

Work Dist::monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) {
  (void)timeout_ns;
  (void)wait_all_ranks;
  throw Error(ErrorKind::kUnsupported,
              OpContext{rank(), "monitored_barrier", g.is_world_default() ? "world" : g.name(), -1, {}},
              "this implementation has no monitored_barrier");
}

Work Dist::batch_isend_irecv(std::span<const P2POp> ops, const Group& g) {
  std::vector<Work> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops)
    works.push_back(op.is_send ? isend(op.tensor, op.peer, op.tag, g) : irecv(op.tensor, op.peer, op.tag, g));
  return join_works(&executor(), std::move(works),
                    "rank " + std::to_string(rank()) + ": batch_isend_irecv of " + std::to_string(ops.size()) +
                        " ops on " + (g.is_world_default() ? std::string("world") : g.name()));
}

}  // namespace collie
