// ChannelTable: one rank's channels -- per peer, the next channel_seq to
// send to it and the next one expected from it (0 for a peer never talked
// to). The message engine looks a peer up for every frame it sends or
// receives in order.
//
// Guarantees: counters are exact 64-bit values whatever `Low` is; take_out()
// returns 0, 1, 2, ... per peer, in() follows advance_in() per peer.
//
// Layout: a rank talks to few peers (log n for the trees and butterflies)
// but a simulation holds every rank's table at once, so a peer's counters
// are kept in `Low` (32 bits) inside one open-addressed array (linear
// probing, at most 7/8 full, grown by a quarter: 12 bytes a peer and no
// node per peer; 17 peers take 20 slots), and move
// to a side map only once one of them outgrows `Low` -- after 2^32 frames
// on one channel, i.e. never in a simulation. (Tests use 8 bits to get
// there.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace collie {

template <typename Low = std::uint32_t>
class ChannelTable {
 public:
  // The channel_seq of the next frame to `peer` (>= 0); advances it.
  std::uint64_t take_out(int peer) {
    Slot& s = slot(peer);
    if (s.key & kWide) return (*wide_)[peer].first++;
    if (s.out == kLowMax) return widen(s, peer).first++;
    return s.out++;
  }
  // The channel_seq expected next from `peer`.
  std::uint64_t in(int peer) const {
    const Slot* s = find(peer);
    if (!s) return 0;
    if (s->key & kWide) return wide_->at(peer).second;
    return s->in;
  }
  // The frame in() named has arrived from `peer`.
  void advance_in(int peer) {
    Slot& s = slot(peer);
    if (s.key & kWide) {
      ++(*wide_)[peer].second;
      return;
    }
    if (s.in == kLowMax) {
      ++widen(s, peer).second;
      return;
    }
    ++s.in;
  }

 private:
  static constexpr std::uint32_t kFree = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t kWide = std::uint32_t{1} << 31;  // the peer's counters are in wide_
  static constexpr Low kLowMax = std::numeric_limits<Low>::max();
  struct Slot {
    std::uint32_t key = kFree;  // the peer, | kWide
    Low out = 0;
    Low in = 0;
  };

  std::size_t home(int peer) const {
    // Fibonacci hashing (the peers of a butterfly differ in single bits),
    // its top 32 bits scaled to the table's size.
    const std::uint64_t h = static_cast<std::uint64_t>(static_cast<std::uint32_t>(peer)) * 0x9e3779b97f4a7c15ull;
    return static_cast<std::size_t>(((h >> 32) * slots_.size()) >> 32);
  }
  std::size_t next(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  static int peer_of(const Slot& s) { return static_cast<int>(s.key & ~kWide); }

  const Slot* find(int peer) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(peer);; i = next(i)) {
      if (slots_[i].key == kFree) return nullptr;
      if (peer_of(slots_[i]) == peer) return &slots_[i];
    }
  }
  // The slot of `peer`, made on first use.
  Slot& slot(int peer) {
    if (const Slot* s = find(peer)) return const_cast<Slot&>(*s);
    if (8 * (used_ + 1) > 7 * slots_.size()) {
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.empty() ? 8 : old.size() + std::max<std::size_t>(4, old.size() / 4), Slot{});
      for (const Slot& s : old)
        if (s.key != kFree) place(s);
    }
    ++used_;
    return place(Slot{static_cast<std::uint32_t>(peer), 0, 0});
  }
  Slot& place(const Slot& s) {
    std::size_t i = home(peer_of(s));
    while (slots_[i].key != kFree) i = next(i);
    return slots_[i] = s;
  }
  // Moves `s`'s counters to wide_.
  std::pair<std::uint64_t, std::uint64_t>& widen(Slot& s, int peer) {
    s.key |= kWide;
    if (!wide_) wide_ = std::make_unique<std::map<int, std::pair<std::uint64_t, std::uint64_t>>>();
    return (*wide_)[peer] = {s.out, s.in};
  }

  std::vector<Slot> slots_;  // empty, or at least 8 with a free one
  std::size_t used_ = 0;
  // (out, in) of the peers past Low; made when the first one is.
  std::unique_ptr<std::map<int, std::pair<std::uint64_t, std::uint64_t>>> wide_;
};

}  // namespace collie
