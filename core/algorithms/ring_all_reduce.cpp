// Ring all_reduce: a reduce-scatter then an all-gather around the ring
// r -> r+1, 2(n-1) steps in all. Each step moves one chunk (count/n
// elements) split into segments; segment j of step k is forwarded as soon as
// segment j of step k-1 has arrived, so sending overlaps receiving
// (pipelining). Bandwidth-optimal: every rank sends 2(n-1)/n of the data.
//
// Chain property: the chunk sent at step k is the chunk received at step
// k-1, in both phases (and across the phase boundary).
#include "core/algorithms/algorithms.h"

#include <iterator>
#include <map>

namespace collie::algorithms {

namespace {
std::size_t chunk_begin(std::size_t count, int n, int i) {
  // floor(count * i / n) without overflow: count = q*n + rem.
  const auto un = static_cast<std::size_t>(n), ui = static_cast<std::size_t>(i);
  return (count / un) * ui + (count % un) * ui / un;
}
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Task<void> ring_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op, std::size_t segment_bytes) {
  const int n = c.size();
  const int r = c.rank();
  if (n == 1) co_return;
  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  const std::size_t max_chunk = chunk_begin(t.count, n, 1) + 1;
  const std::size_t esize = dtype_size(t.dtype);
  const std::size_t seg_elems = segment_bytes / esize ? segment_bytes / esize : 1;
  const int nseg = static_cast<int>((max_chunk + seg_elems - 1) / seg_elems) > 0
                       ? static_cast<int>((max_chunk + seg_elems - 1) / seg_elems)
                       : 1;
  auto segment = [&](int chunk, int j) {
    const std::size_t b = chunk_begin(t.count, n, chunk), e = chunk_begin(t.count, n, chunk + 1);
    const std::size_t len = e - b;
    const std::size_t sb = b + len * static_cast<std::size_t>(j) / static_cast<std::size_t>(nseg);
    const std::size_t se = b + len * static_cast<std::size_t>(j + 1) / static_cast<std::size_t>(nseg);
    return t.slice(sb, se - sb);
  };
  const int steps = 2 * (n - 1);
  // Step k sends chunk send_chunk(k) and receives recv_chunk(k).
  auto send_chunk = [&](int k) { return k < n - 1 ? mod(r - k, n) : mod(r + 1 - (k - (n - 1)), n); };
  auto recv_chunk = [&](int k) { return k < n - 1 ? mod(r - k - 1, n) : mod(r - (k - (n - 1)), n); };

  // Sends still in flight, by step. Steps whose sends all completed are
  // dropped as the ring advances, so a rank holds O(segments) Works, not
  // O(n * segments), whatever the ring's length.
  std::map<int, std::vector<Work>> sends;
  auto drop_completed = [&sends] {
    for (auto it = sends.begin(); it != sends.end();) {
      bool done = true;
      for (const Work& w : it->second) done = done && w.is_success();
      it = done ? sends.erase(it) : std::next(it);
    }
  };
  std::vector<Work> prev_recvs, cur_recvs;
  for (int k = 0; k < steps; ++k) {
    c.step(k < n - 1 ? "reduce_scatter" : "all_gather", k < n - 1 ? k : k - (n - 1));
    if (k >= n - 1) {
      // The all-gather overwrites the chunk sent at step k-(n-1) of the
      // reduce-scatter: that send must be done (it is, causally; this makes
      // it explicit for transports that read send buffers late).
      if (auto it = sends.find(k - (n - 1)); it != sends.end()) co_await wait_all(it->second);
    }
    drop_completed();
    cur_recvs.clear();
    for (int j = 0; j < nseg; ++j) {
      const int tag = k * nseg + j;
      TensorView dst = segment(recv_chunk(k), j);
      cur_recvs.push_back(k < n - 1 ? c.recv_reduce(left, tag, dst, op) : c.recv(left, tag, dst));
    }
    for (int j = 0; j < nseg; ++j) {
      if (k > 0) co_await prev_recvs[static_cast<std::size_t>(j)];
      sends[k].push_back(c.send(right, k * nseg + j, segment(send_chunk(k), j)));
    }
    std::swap(prev_recvs, cur_recvs);
  }
  co_await wait_all(prev_recvs);
  for (auto& [step, works] : sends) co_await wait_all(works);
}

}  // namespace collie::algorithms
