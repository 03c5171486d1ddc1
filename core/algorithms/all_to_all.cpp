// all_to_all: rank i's block j goes to rank j, which keeps it as its block i.
//
// Pairwise: n-1 steps; at step s rank r sends its block r+s to rank r+s and
// receives rank r-s's block into its block r-s, one partner each way per
// step (MPICH's pairwise exchange), so no rank is sent to by many at once.
//
// Bruck: ceil(log2 n) steps for equal blocks. Rank r first rotates its
// blocks so that position k holds the block for rank r+k; at the step with
// distance d it sends every position with bit d set to rank r+d and
// receives the same positions from rank r-d. A block at position k thus
// travels k ranks in all, landing on its destination, where position k
// holds what rank r-k sent.
#include "core/algorithms/algorithms.h"

namespace collie::algorithms {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Task<void> pairwise_all_to_all(CollectiveContext& c, std::vector<TensorView> out, std::vector<TensorView> in) {
  const int n = c.size();
  const int r = c.rank();
  c.copy(out[static_cast<std::size_t>(r)], in[static_cast<std::size_t>(r)]);
  for (int s = 1; s < n; ++s) {
    c.step("pairwise", s - 1);
    const int dst = mod(r + s, n), src = mod(r - s, n);
    Work rv = c.recv(src, s, out[static_cast<std::size_t>(src)]);
    Work sd = c.send(dst, s, in[static_cast<std::size_t>(dst)]);
    co_await rv;
    co_await sd;
  }
}

Task<void> bruck_all_to_all(CollectiveContext& c, std::vector<TensorView> out, std::vector<TensorView> in) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t count = in[0].count;
  const DType dtype = in[0].dtype;
  std::shared_ptr<std::byte> tmp_holder, send_holder, recv_holder;
  const TensorView tmp = c.scratch(dtype, count * static_cast<std::size_t>(n), tmp_holder);
  auto at = [&](int k) { return tmp.slice(static_cast<std::size_t>(k) * count, count); };
  for (int k = 0; k < n; ++k) c.copy(at(k), in[static_cast<std::size_t>(mod(r + k, n))]);
  const std::size_t most = static_cast<std::size_t>(n / 2 + 1) * count;
  const TensorView send_pack = c.scratch(dtype, most, send_holder);
  const TensorView recv_pack = c.scratch(dtype, most, recv_holder);
  int b = 0;
  for (int d = 1; d < n; d *= 2, ++b) {
    c.step("bruck", b);
    std::vector<int> moving;
    for (int k = 1; k < n; ++k)
      if (k & d) moving.push_back(k);
    const std::size_t len = moving.size() * count;
    for (std::size_t i = 0; i < moving.size(); ++i) c.copy(send_pack.slice(i * count, count), at(moving[i]));
    Work rv = c.recv(mod(r - d, n), b, recv_pack.slice(0, len));
    Work sd = c.send(mod(r + d, n), b, send_pack.slice(0, len));
    co_await rv;
    co_await sd;
    for (std::size_t i = 0; i < moving.size(); ++i) c.copy(at(moving[i]), recv_pack.slice(i * count, count));
  }
  for (int k = 0; k < n; ++k) c.copy(out[static_cast<std::size_t>(mod(r - k, n))], at(k));
}

}  // namespace collie::algorithms
