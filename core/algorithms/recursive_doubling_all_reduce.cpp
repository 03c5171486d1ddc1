// Recursive-doubling all_reduce for small messages: log2(p) exchanges of the
// whole vector, p the largest power of two <= n. The first 2*(n-p) ranks pair
// up before (the even one folds its data into the odd one) and after (the
// odd one returns the result), as in MPICH.
#include "core/algorithms/algorithms.h"
#include "core/algorithms/power_of_two.h"

namespace collie::algorithms {

Task<void> recursive_doubling_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op) {
  const int n = c.size();
  const int r = c.rank();
  if (n == 1) co_return;
  const Fold f = fold_to_power_of_two(n, r);
  enum : int { kFoldTag = 0, kUnfoldTag = 1, kStepTag = 2 };

  if (f.role != Fold::kNone) c.step("fold");
  if (f.role == Fold::kSender) {
    co_await c.send(f.partner, kFoldTag, t);
  } else if (f.role == Fold::kReceiver) {
    co_await c.recv_reduce(f.partner, kFoldTag, t, op);
  }
  if (f.new_rank >= 0) {
    std::shared_ptr<std::byte> holder;
    TensorView tmp = c.scratch(t.dtype, t.count, holder);
    int step = 0;
    for (int mask = 1; mask < f.pof2; mask <<= 1, ++step) {
      c.step("exchange", step);
      const int peer = f.real_rank(f.new_rank ^ mask);
      Work s = c.send(peer, kStepTag + step, t);
      Work rv = c.recv(peer, kStepTag + step, tmp);
      co_await s;
      co_await rv;
      co_await c.reduce_local(t, tmp, op);
    }
  }
  if (f.role != Fold::kNone) c.step("unfold");
  if (f.role == Fold::kReceiver) {
    co_await c.send(f.partner, kUnfoldTag, t);
  } else if (f.role == Fold::kSender) {
    co_await c.recv(f.partner, kUnfoldTag, t);
  }
}

}  // namespace collie::algorithms
