// Dissemination barrier: in round k every rank signals r + 2^k and waits for
// r - 2^k; after ceil(log2 n) rounds every rank has heard, transitively, from
// every other. Messages are empty.
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

Task<void> dissemination_barrier(CollectiveContext& c) {
  const int n = c.size();
  const int r = c.rank();
  static std::byte token{};
  TensorView empty{&token, DType::kUInt8, 0, MemorySpace::kHost};
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    c.step("round", round);
    Work s = c.send((r + k) % n, round, empty);
    Work rv = c.recv((r - k + n) % n, round, empty);
    co_await s;
    co_await rv;
  }
}

}  // namespace collie::algorithms
