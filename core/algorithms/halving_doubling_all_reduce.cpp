// Rabenseifner's all_reduce: a reduce-scatter by recursive halving (each
// step exchanges half of the remaining range with a partner and reduces the
// half it keeps) then an all-gather by recursive doubling (the same partners
// in reverse order, exchanging the reduced ranges). log2(p) steps each way
// and 2(p-1)/p of the data sent per rank: the choice for medium messages and
// large groups. Non-powers of two fold as in recursive doubling.
#include "core/algorithms/algorithms.h"
#include "core/algorithms/power_of_two.h"

namespace collie::algorithms {

namespace {

enum : int { kFoldTag = 0, kUnfoldTag = 1, kStepTag = 2 };

// The two halves of the range a rank holds at reduce-scatter step `step`
// (mask pof2/2 >> step), replayed from the whole tensor: a list of every
// step's ranges was ~1 KiB per rank for the whole call.
struct Level {
  int peer;
  std::size_t keep_lo, keep_hi, give_lo, give_hi;
};
Level level(const Fold& f, std::size_t count, int step) {
  std::size_t lo = 0, hi = count;
  Level lv{};
  for (int s = 0, mask = f.pof2 / 2; s <= step; ++s, mask >>= 1) {
    const int new_peer = f.new_rank ^ mask;
    const std::size_t mid = lo + (hi - lo) / 2;
    lv = f.new_rank > new_peer ? Level{f.real_rank(new_peer), mid, hi, lo, mid}
                               : Level{f.real_rank(new_peer), lo, mid, mid, hi};
    lo = lv.keep_lo;
    hi = lv.keep_hi;
  }
  return lv;
}

struct Exchange {
  Work send, recv;
};

// Starts exchange `step` of 2 * levels: reduce-scatter steps first, then the
// all-gather's in reverse order. Not part of the coroutine: its locals would
// stay in the frame of every rank for the whole call.
Exchange start_step(CollectiveContext& c, const Fold& f, TensorView t, ReduceOp op, int levels, int step) {
  if (step < levels) {
    c.step("reduce_scatter", step);
    const Level lv = level(f, t.count, step);
    Work s = c.send(lv.peer, kStepTag + step, t.slice(lv.give_lo, lv.give_hi - lv.give_lo));
    Work rv = c.recv_reduce(lv.peer, kStepTag + step, t.slice(lv.keep_lo, lv.keep_hi - lv.keep_lo), op);
    return {std::move(s), std::move(rv)};
  }
  c.step("all_gather", step - levels);
  const Level lv = level(f, t.count, 2 * levels - 1 - step);
  Work s = c.send(lv.peer, kStepTag + step, t.slice(lv.keep_lo, lv.keep_hi - lv.keep_lo));
  Work rv = c.recv(lv.peer, kStepTag + step, t.slice(lv.give_lo, lv.give_hi - lv.give_lo));
  return {std::move(s), std::move(rv)};
}

// The fold's or unfold's exchange of this rank (none when it has no
// partner or the world is a power of two).
Work fold(CollectiveContext& c, const Fold& f, TensorView t, ReduceOp op) {
  if (f.role == Fold::kNone) return {};
  c.step("fold");
  return f.role == Fold::kSender ? c.send(f.partner, kFoldTag, t) : c.recv_reduce(f.partner, kFoldTag, t, op);
}
Work unfold(CollectiveContext& c, const Fold& f, TensorView t) {
  if (f.role == Fold::kNone) return {};
  c.step("unfold");
  return f.role == Fold::kReceiver ? c.send(f.partner, kUnfoldTag, t) : c.recv(f.partner, kUnfoldTag, t);
}

}  // namespace

// A coroutine keeps every local and every awaited temporary in its frame,
// each in a place of its own, for the whole call on every rank: so one
// exchange, reused by every co_await, and the rest in plain functions.
Task<void> halving_doubling_all_reduce(CollectiveContext& c, TensorView t, ReduceOp op) {
  if (c.size() == 1) co_return;
  const Fold f = fold_to_power_of_two(c.size(), c.rank());
  Exchange x;
  x.recv = fold(c, f, t, op);
  co_await x.recv;
  if (f.new_rank >= 0) {
    int levels = 0;
    for (int mask = f.pof2 / 2; mask >= 1; mask >>= 1) ++levels;
    for (int step = 0; step < 2 * levels; ++step) {
      x = start_step(c, f, t, op, levels, step);
      co_await x.send;
      co_await x.recv;
    }
  }
  x.recv = unfold(c, f, t);
  co_await x.recv;
}

}  // namespace collie::algorithms
