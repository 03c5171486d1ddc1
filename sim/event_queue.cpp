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

void EventQueue::append(std::size_t bucket, const Event& e) {
  Chunk* c = buckets_[bucket];
  if (!c || c->count == Chunk::kEvents) {
    Chunk* fresh = spare_;
    if (fresh) {
      spare_ = fresh->next;
    } else {
      chunks_.push_back(std::make_unique<Chunk>());
      fresh = chunks_.back().get();
    }
    fresh->next = c;
    fresh->count = 0;
    buckets_[bucket] = c = fresh;
  }
  c->events[c->count++] = e;
}

void EventQueue::push(const Event& e) {
  ++size_;
  const std::uint64_t k = key(e.time);
  if (k <= current_) {
    now_.push_back(e);
    std::push_heap(now_.begin(), now_.end(), Later{});
    return;
  }
  append(bucket_of(k), e);
}

void EventQueue::refill() {
  std::size_t b = 1;
  while (!buckets_[b]) ++b;
  Chunk* const from = buckets_[b];
  buckets_[b] = nullptr;
  std::uint64_t earliest = key(from->events[0].time);
  for (const Chunk* c = from; c; c = c->next)
    for (std::uint32_t i = 0; i < c->count; ++i) earliest = std::min(earliest, key(c->events[i].time));
  current_ = earliest;
  // Every event of `from` now differs from current_ below bit b-1: each
  // lands in a lower bucket, or in now_ when it is of the earliest time.
  Chunk* last = from;
  for (Chunk* c = from; c; c = c->next) {
    for (std::uint32_t i = 0; i < c->count; ++i) {
      const Event& e = c->events[i];
      const std::uint64_t k = key(e.time);
      if (k == earliest) now_.push_back(e);
      else append(bucket_of(k), e);
    }
    last = c;
  }
  last->next = spare_;
  spare_ = from;
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
  for (Chunk*& head : buckets_) {
    while (Chunk* c = head) {
      all.insert(all.end(), c->events, c->events + c->count);
      head = c->next;
      c->next = spare_;
      spare_ = c;
    }
  }
  size_ = 0;
  return all;
}

}  // namespace collie::sim
