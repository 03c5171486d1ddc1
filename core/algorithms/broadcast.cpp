// Broadcast: binomial tree (log2 n rounds; rank v receives from v minus its
// lowest set bit and forwards to v + 2^k for every 2^k below that bit,
// ranks relative to the root) and linear (the root sends to everyone).
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

Task<void> binomial_broadcast(CollectiveContext& c, TensorView t, int root) {
  const int n = c.size();
  const int vr = (c.rank() - root + n) % n;
  auto real = [&](int v) { return (v + root) % n; };
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      c.step("receive from parent");
      co_await c.recv(real(vr - mask), 0, t);
      break;
    }
    mask <<= 1;
  }
  std::vector<Work> sends;
  c.step("send to children");
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) sends.push_back(c.send(real(vr + mask), 0, t));
  }
  co_await wait_all(sends);
}

Task<void> linear_broadcast(CollectiveContext& c, TensorView t, int root) {
  c.step(c.rank() == root ? "send to all" : "receive from root");
  if (c.rank() != root) {
    co_await c.recv(root, 0, t);
    co_return;
  }
  std::vector<Work> sends;
  for (int p = 0; p < c.size(); ++p)
    if (p != root) sends.push_back(c.send(p, 0, t));
  co_await wait_all(sends);
}

}  // namespace collie::algorithms
