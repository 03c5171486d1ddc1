// Reduce to a root, leaving every other rank's tensor unchanged (stricter
// than Gloo, whose non-root tensors end with partial sums). Children are
// combined one at a time in a fixed order, never in arrival order, so the
// result does not depend on timing.
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

Task<void> binomial_reduce(CollectiveContext& c, TensorView t, int root, ReduceOp op) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;
  auto real = [&](int v) { return (v + root) % n; };
  // Does this rank have children? (vr | mask) < n for some mask below vr's
  // lowest set bit (any mask < n for the root).
  const bool has_children = (vr | 1) < n && (vr & 1) == 0;
  std::shared_ptr<std::byte> holder;
  TensorView acc = t;
  if (vr != 0 && has_children) {
    acc = c.scratch(t.dtype, t.count, holder);
    c.copy(acc, t);
  }
  for (int mask = 1; mask < n; mask <<= 1) {
    if ((vr & mask) == 0) {
      const int child = vr | mask;
      if (child < n) {
        c.step("combine child", real(child));
        co_await c.recv_reduce(real(child), 0, acc, op);
      }
    } else {
      c.step("send to parent");
      co_await c.send(real(vr & ~mask), 0, acc);
      break;
    }
  }
}

Task<void> linear_reduce(CollectiveContext& c, TensorView t, int root, ReduceOp op) {
  if (c.rank() != root) {
    c.step("send to root");
    co_await c.send(root, 0, t);
    co_return;
  }
  for (int p = 0; p < c.size(); ++p) {
    if (p == root) continue;
    c.step("combine rank", p);
    co_await c.recv_reduce(p, 0, t, op);
  }
}

}  // namespace collie::algorithms
