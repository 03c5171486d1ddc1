// all_gather. Blocks are addressed by the rank that contributed them, in the
// caller's output (a list of tensors, or one tensor cut into group-size
// blocks), so neither algorithm needs a final rotation.
//
// Ring: n-1 steps; at step s rank r forwards block r-s to r+1 and receives
// block r-s-1 from r-1.
//
// Bruck: ceil(log2 n) steps for any n. Before the step with distance d, rank
// r holds blocks [r, r+d) (mod n); it sends [r, r+c) to r-d and receives
// [r+d, r+d+c) from r+d, where c = min(d, n-d). A range that wraps past block
// n-1 travels as two messages (tags 2k and 2k+1). It needs the blocks to be
// contiguous: with a list output it gathers in scratch memory and copies out.
#include "core/algorithms/algorithms.h"

#include <algorithm>

namespace collie::algorithms {

TensorView Blocks::operator[](int i) const {
  return list_.empty() ? whole_.slice(static_cast<std::size_t>(i) * block_count_, block_count_)
                       : list_[static_cast<std::size_t>(i)];
}

Task<void> ring_all_gather(CollectiveContext& c, Blocks out, TensorView in) {
  const int n = c.size();
  const int r = c.rank();
  auto mod = [n](int a) { return ((a % n) + n) % n; };
  c.copy(out[r], in);
  std::vector<Work> sends;
  for (int s = 0; s < n - 1; ++s) {
    c.step("ring", s);
    Work rv = c.recv(mod(r - 1), s, out[mod(r - s - 1)]);
    sends.push_back(c.send(mod(r + 1), s, out[mod(r - s)]));
    co_await rv;
  }
  co_await wait_all(sends);
}

Task<void> bruck_all_gather(CollectiveContext& c, Blocks out, TensorView in) {
  const int n = c.size();
  const int r = c.rank();
  const std::size_t count = in.count;
  auto mod = [n](int a) { return ((a % n) + n) % n; };
  std::shared_ptr<std::byte> holder;
  const TensorView buf = out.contiguous() ? out.whole() : c.scratch(in.dtype, count * static_cast<std::size_t>(n), holder);
  // Blocks [first, first+len) mod n as at most two contiguous views.
  auto pieces = [&](int first, int len) {
    std::vector<TensorView> v;
    const int head = std::min(len, n - first);
    v.push_back(buf.slice(static_cast<std::size_t>(first) * count, static_cast<std::size_t>(head) * count));
    if (len > head) v.push_back(buf.slice(0, static_cast<std::size_t>(len - head) * count));
    return v;
  };
  c.copy(buf.slice(static_cast<std::size_t>(r) * count, count), in);
  int k = 0;
  for (int d = 1; d < n; d *= 2, ++k) {
    const int cnt = std::min(d, n - d);
    c.step("bruck", k);
    std::vector<Work> ops;
    const auto in_pieces = pieces(mod(r + d), cnt);
    const auto out_pieces = pieces(r, cnt);
    for (std::size_t p = 0; p < in_pieces.size(); ++p)
      ops.push_back(c.recv(mod(r + d), 2 * k + static_cast<int>(p), in_pieces[p]));
    for (std::size_t p = 0; p < out_pieces.size(); ++p)
      ops.push_back(c.send(mod(r - d), 2 * k + static_cast<int>(p), out_pieces[p]));
    co_await wait_all(ops);
  }
  if (!out.contiguous())
    for (int b = 0; b < n; ++b) c.copy(out[b], buf.slice(static_cast<std::size_t>(b) * count, count));
}

}  // namespace collie::algorithms
