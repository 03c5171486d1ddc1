// Ring all_gather: n-1 steps; at step s rank r forwards block r-s to r+1 and
// receives block r-s-1 from r-1, straight into the caller's output list.
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

Task<void> ring_all_gather(CollectiveContext& c, std::vector<TensorView> out, TensorView in) {
  const int n = c.size();
  const int r = c.rank();
  auto mod = [n](int a) { return ((a % n) + n) % n; };
  c.copy(out[static_cast<std::size_t>(r)], in);
  std::vector<Work> sends;
  for (int s = 0; s < n - 1; ++s) {
    c.step("ring", s);
    Work rv = c.recv(mod(r - 1), s, out[static_cast<std::size_t>(mod(r - s - 1))]);
    sends.push_back(c.send(mod(r + 1), s, out[static_cast<std::size_t>(mod(r - s))]));
    co_await rv;
  }
  co_await wait_all(sends);
}

}  // namespace collie::algorithms
