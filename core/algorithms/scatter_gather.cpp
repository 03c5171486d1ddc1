// Scatter and gather, linear and binomial.
//
// Binomial: ranks relative to the root; the subtree of relative rank v holds
// blocks [v, v + min(lowbit(v), n - v)). Scatter: the root packs the list in
// relative order and each rank forwards its children's sub-ranges. Gather:
// the reverse. log2(n) latencies instead of n-1, at the price of copying
// blocks through intermediate ranks -- the choice for small blocks.
#include <algorithm>

#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

namespace {
// Blocks in the subtree rooted at relative rank v (v != 0), or n for the root.
int subtree_blocks(int v, int n) {
  if (v == 0) return n;
  const int low = v & -v;
  return std::min(low, n - v);
}
}  // namespace

Task<void> linear_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root) {
  c.step(c.rank() == root ? "send to all" : "receive from root");
  if (c.rank() != root) {
    co_await c.recv(root, 0, out);
    co_return;
  }
  std::vector<Work> sends;
  for (int p = 0; p < c.size(); ++p)
    if (p != root) sends.push_back(c.send(p, 0, list[static_cast<std::size_t>(p)]));
  c.copy(out, list[static_cast<std::size_t>(root)]);
  co_await wait_all(sends);
}

Task<void> linear_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root) {
  c.step(c.rank() == root ? "receive from all" : "send to root");
  if (c.rank() != root) {
    co_await c.send(root, 0, in);
    co_return;
  }
  std::vector<Work> recvs;
  for (int p = 0; p < c.size(); ++p)
    if (p != root) recvs.push_back(c.recv(p, 0, list[static_cast<std::size_t>(p)]));
  c.copy(list[static_cast<std::size_t>(root)], in);
  co_await wait_all(recvs);
}

Task<void> binomial_scatter(CollectiveContext& c, TensorView out, std::vector<TensorView> list, int root) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;
  auto real = [&](int v) { return (v + root) % n; };
  const std::size_t count = out.count;
  const int mine = subtree_blocks(vr, n);
  std::shared_ptr<std::byte> holder;
  TensorView tmp = c.scratch(out.dtype, count * static_cast<std::size_t>(mine), holder);
  int mask = 1;
  if (vr == 0) {
    for (int v = 0; v < n; ++v) c.copy(tmp.slice(count * static_cast<std::size_t>(v), count), list[static_cast<std::size_t>(real(v))]);
    while (mask < n) mask <<= 1;
  } else {
    while ((vr & mask) == 0) mask <<= 1;
    c.step("receive from parent");
    co_await c.recv(real(vr - mask), 0, tmp);
  }
  std::vector<Work> sends;
  c.step("send to children");
  for (mask >>= 1; mask > 0; mask >>= 1) {
    const int child = vr + mask;
    if (child < n) {
      const int blocks = subtree_blocks(child, n);
      sends.push_back(c.send(real(child), 0,
                             tmp.slice(count * static_cast<std::size_t>(mask), count * static_cast<std::size_t>(blocks))));
    }
  }
  c.copy(out, tmp.slice(0, count));
  co_await wait_all(sends);
}

Task<void> binomial_gather(CollectiveContext& c, TensorView in, std::vector<TensorView> list, int root) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;
  auto real = [&](int v) { return (v + root) % n; };
  const std::size_t count = in.count;
  const int mine = subtree_blocks(vr, n);
  std::shared_ptr<std::byte> holder;
  TensorView tmp = c.scratch(in.dtype, count * static_cast<std::size_t>(mine), holder);
  c.copy(tmp.slice(0, count), in);
  int top = 1;  // lowest set bit of vr (n rounded up for the root)
  if (vr == 0) {
    while (top < n) top <<= 1;
  } else {
    top = vr & -vr;
  }
  std::vector<Work> recvs;
  c.step("receive from children");
  for (int mask = 1; mask < top; mask <<= 1) {
    const int child = vr + mask;
    if (child < n) {
      const int blocks = subtree_blocks(child, n);
      recvs.push_back(c.recv(real(child), 0,
                             tmp.slice(count * static_cast<std::size_t>(mask), count * static_cast<std::size_t>(blocks))));
    }
  }
  co_await wait_all(recvs);
  if (vr != 0) {
    c.step("send to parent");
    co_await c.send(real(vr - top), 0, tmp);
    co_return;
  }
  for (int v = 0; v < n; ++v) c.copy(list[static_cast<std::size_t>(real(v))], tmp.slice(count * static_cast<std::size_t>(v), count));
}

}  // namespace collie::algorithms
