// EventQueue: the simulator's pending events, popped in (time, tiebreak,
// order) order. `order` is unique per event, so this is a total order: the
// sequence of pops is a function of the pushes alone, whatever structure
// holds them (the trace hash depends on it; sim/determinism_test.cpp pins it).
//
// Structure: the events of the current time (the time of the events last
// moved out of the buckets) sit in a vector sorted latest first, popped from
// its back; events pushed at or before the current time while it runs sit
// in a small binary heap beside it, and a pop takes the earlier of the two
// fronts. Later events sit in
// a radix heap over their time -- 65 buckets, bucket b holding the events
// whose time differs from the current time first at bit b-1, each bucket an
// unordered vector. A push is an append (no sift through a heap of every
// rank's events: at 100k ranks that heap was the simulator's largest cost);
// when the small heap runs dry, the lowest non-empty bucket is split around
// its earliest time, whose events move to the small heap. Each event moves
// down at most 64 buckets in its life, usually one or two. A large world's
// ranks run in step, so the current time often holds thousands of events:
// one sort of them costs less than a heap pop each (the heap was 6% of a
// 16,384-rank run).
//
// Not thread-safe. Memory: the most events ever pending at once, in 4 KiB
// chunks, plus one partly filled chunk per bucket; kept until destruction,
// so the steady state allocates nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/executor.h"

namespace collie::sim {

// 40 bytes: a large world has several pending per rank.
struct Event {
  Nanos time = 0;
  std::uint64_t tiebreak = 0;  // drawn from the run's Prng when pushed
  std::uint64_t order = 0;     // unique: the push count
  // The simulator's payload: a pointer (a coroutine, a send cookie) or a
  // number (a frame's slot, a rank), as its kind says.
  std::uint64_t payload = 0;
  std::int32_t rank = 0;
  std::uint8_t kind = 0;

  void* ptr() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(payload)); }
  std::uint32_t frame() const { return static_cast<std::uint32_t>(payload); }
};
static_assert(sizeof(Event) == 40);

// Whether `a` runs before `b`.
inline bool runs_before(const Event& a, const Event& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.tiebreak != b.tiebreak) return a.tiebreak < b.tiebreak;
  return a.order < b.order;
}

class EventQueue {
 public:
  void push(const Event& e);
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // The first event. Requires !empty().
  const Event& top();
  // Removes and returns the first event. Requires !empty().
  Event pop();
  // The i-th event still to run of the current time's sorted batch (0: its
  // next), or null past the batch. A hint for prefetching only: events
  // pushed at the current time while it runs (the small heap) may run
  // before it.
  const Event* upcoming(std::size_t i) const {
    return i < sorted_.size() ? &sorted_[sorted_.size() - 1 - i] : nullptr;
  }
  // Removes every event and returns them in no particular order (for the
  // explorer, which picks among them by its own rules and pushes the rest
  // back).
  std::vector<Event> take_all();

 private:
  // Time as an unsigned key with the same order.
  static std::uint64_t key(Nanos t) { return static_cast<std::uint64_t>(t) ^ (std::uint64_t{1} << 63); }
  std::size_t bucket_of(std::uint64_t k) const;
  // Requires sorted_ and now_ empty and an event in a bucket: moves the
  // events of the earliest time into sorted_, which becomes the current time.
  void refill();

  // A bucket is a list of chunks, the first one being filled; chunks come
  // from one free list, so events moving down never reallocate anything.
  struct Chunk {
    static constexpr std::uint32_t kEvents = 84;  // ~4 KiB
    Chunk* next = nullptr;
    std::uint32_t count = 0;
    Event events[kEvents];
  };
  void append(std::size_t bucket, const Event& e);

  std::vector<Event> sorted_;  // of the current time, latest first (earliest at back)
  std::vector<Event> now_;     // a heap (by runs_before, earliest at front); times <= current_
  // Whether the next event is sorted_'s back rather than now_'s front.
  bool from_sorted() const;
  std::uint64_t current_ = 0;  // key of the current time; every bucketed event's key is above it
  std::array<Chunk*, 65> buckets_{};
  Chunk* spare_ = nullptr;                      // free chunks
  std::vector<std::unique_ptr<Chunk>> chunks_;  // every chunk ever made (the high-water mark)
  std::size_t size_ = 0;
};

}  // namespace collie::sim
