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

Task<void> monitored_barrier(CollectiveContext& c) {
  const int n = c.size();
  static std::byte token{};
  TensorView empty{&token, DType::kUInt8, 0, MemorySpace::kHost};
  if (c.rank() == 0) {
    // Every arrival is posted at once, so a timeout names exactly the
    // members that have not arrived.
    c.step(kMonitorWaitsPhase);
    std::vector<Work> arrivals;
    for (int r = 1; r < n; ++r) arrivals.push_back(c.recv(r, 0, empty));
    for (Work& w : arrivals) co_await w;
    c.step("release");
    std::vector<Work> releases;
    for (int r = 1; r < n; ++r) releases.push_back(c.send(r, 1, empty));
    for (Work& w : releases) co_await w;
  } else {
    c.step("arrive");
    Work arrived = c.send(0, 0, empty);
    Work released = c.recv(0, 1, empty);
    co_await arrived;
    c.step("wait for release");
    co_await released;
  }
}

}  // namespace collie::algorithms
