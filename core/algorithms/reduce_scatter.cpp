// reduce_scatter: group rank i ends with the reduction of every rank's
// block i. The input is only read: the ring reduces in a copy of it.
//
// Ring: at step k (0..n-2) rank r sends its partial sum of block r-k-1 to
// r+1 and receives block r-k-2 from r-1, combining it into its own copy;
// the block sent at step k is the one completed at step k-1, and the last
// one completed is block r. Each block moves in segments, so segment j of
// step k leaves as soon as segment j of step k-1 has arrived.
//
// Pairwise: all n-1 blocks go straight to their owners at once; each rank
// combines its n contributions in group-rank order.
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Task<void> ring_reduce_scatter(CollectiveContext& c, TensorView out, Blocks in, ReduceOp op,
                               std::size_t segment_bytes) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t count = out.count;
  if (n == 1) {
    c.copy(out, in[0]);
    co_return;
  }
  std::shared_ptr<std::byte> holder;
  const TensorView acc = c.scratch(out.dtype, count * static_cast<std::size_t>(n), holder);
  for (int b = 0; b < n; ++b) c.copy(acc.slice(static_cast<std::size_t>(b) * count, count), in[b]);
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  const std::size_t esize = dtype_size(out.dtype);
  const std::size_t seg_elems = std::max<std::size_t>(1, segment_bytes / esize);
  const int nseg = static_cast<int>(std::max<std::size_t>(1, (count + seg_elems - 1) / seg_elems));
  auto segment = [&](int block, int j) {
    const std::size_t base = static_cast<std::size_t>(block) * count;
    const std::size_t b = count * static_cast<std::size_t>(j) / static_cast<std::size_t>(nseg);
    const std::size_t e = count * static_cast<std::size_t>(j + 1) / static_cast<std::size_t>(nseg);
    return acc.slice(base + b, e - b);
  };
  std::vector<Work> sends, prev_recvs, cur_recvs;
  for (int k = 0; k < n - 1; ++k) {
    c.step("ring", k);
    cur_recvs.clear();
    for (int j = 0; j < nseg; ++j) cur_recvs.push_back(c.recv_reduce(left, k * nseg + j, segment(mod(r - k - 2, n), j), op));
    for (int j = 0; j < nseg; ++j) {
      if (k > 0) co_await prev_recvs[static_cast<std::size_t>(j)];
      sends.push_back(c.send(right, k * nseg + j, segment(mod(r - k - 1, n), j)));
    }
    std::swap(prev_recvs, cur_recvs);
  }
  co_await wait_all(prev_recvs);
  co_await wait_all(sends);
  c.copy(out, acc.slice(static_cast<std::size_t>(r) * count, count));
}

Task<void> pairwise_reduce_scatter(CollectiveContext& c, TensorView out, Blocks in, ReduceOp op) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t count = out.count;
  if (n == 1) {
    c.copy(out, in[0]);
    co_return;
  }
  // What rank p sent: slot p (p < r) or p - 1 (p > r) of the scratch.
  std::shared_ptr<std::byte> holder;
  const TensorView got = c.scratch(out.dtype, count * static_cast<std::size_t>(n - 1), holder);
  auto from = [&](int p) {
    return p == r ? in[r] : got.slice(static_cast<std::size_t>(p < r ? p : p - 1) * count, count);
  };
  c.step("pairwise", 0);
  std::vector<Work> ops;
  for (int s = 1; s < n; ++s) {
    const int src = mod(r - s, n);
    ops.push_back(c.recv(src, 0, from(src)));
  }
  for (int s = 1; s < n; ++s) {
    const int dst = mod(r + s, n);
    ops.push_back(c.send(dst, 0, in[dst]));
  }
  co_await wait_all(ops);
  c.step("combine", 0);
  c.copy(out, from(0));
  for (int p = 1; p < n; ++p) co_await c.reduce_local(out, from(p), op);
}

}  // namespace collie::algorithms
