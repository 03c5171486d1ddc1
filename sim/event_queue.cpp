#include "sim/event_queue.h"

#include <algorithm>
#include <bit>

namespace collie::sim {

namespace {
struct Later {
  bool operator()(const Event& a, const Event& b) const { return runs_before(b, a); }
};
}  // namespace

std::size_t EventQueue::bucket_of(std::uint64_t k) const {
  return static_cast<std::size_t>(64 - std::countl_zero(k ^ current_));
}

void EventQueue::push(const Event& e) {
  ++size_;
  const std::uint64_t k = key(e.time);
  if (k <= current_) {
    now_.push_back(e);
    std::push_heap(now_.begin(), now_.end(), Later{});
    return;
  }
  buckets_[bucket_of(k)].push_back(e);
  ++bucketed_;
}

void EventQueue::refill() {
  std::size_t b = 1;
  while (buckets_[b].empty()) ++b;
  std::vector<Event>& from = buckets_[b];
  std::uint64_t earliest = key(from.front().time);
  for (const Event& e : from) earliest = std::min(earliest, key(e.time));
  current_ = earliest;
  // Every event of `from` now differs from current_ below bit b-1: each
  // lands in a lower bucket, or in now_ when it is of the earliest time.
  for (const Event& e : from) {
    const std::uint64_t k = key(e.time);
    if (k == earliest) now_.push_back(e);
    else buckets_[bucket_of(k)].push_back(e);
  }
  bucketed_ -= now_.size();
  from.clear();
  // A large bucket's events have all moved down: its memory goes back
  // rather than staying reserved beside theirs.
  if (from.capacity() > kKeptCapacity) std::vector<Event>().swap(from);
  std::make_heap(now_.begin(), now_.end(), Later{});
}

const Event& EventQueue::top() {
  if (now_.empty()) refill();
  return now_.front();
}

Event EventQueue::pop() {
  if (now_.empty()) refill();
  std::pop_heap(now_.begin(), now_.end(), Later{});
  const Event e = now_.back();
  now_.pop_back();
  --size_;
  return e;
}

std::vector<Event> EventQueue::take_all() {
  std::vector<Event> all = std::move(now_);
  now_.clear();
  for (auto& b : buckets_) {
    all.insert(all.end(), b.begin(), b.end());
    b.clear();
  }
  bucketed_ = 0;
  size_ = 0;
  return all;
}

}  // namespace collie::sim
