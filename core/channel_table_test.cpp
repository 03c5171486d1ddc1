// ChannelTable counts exactly per peer, in 32 bits or past them: with
// 8-bit counters, a channel that outgrows them goes on from 256.
#include "core/channel_table.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <utility>

namespace collie {
namespace {

TEST(ChannelTable, CountsFromZeroPerPeer) {
  ChannelTable<> t;
  EXPECT_EQ(t.in(5), 0u);
  EXPECT_EQ(t.take_out(5), 0u);
  EXPECT_EQ(t.take_out(5), 1u);
  EXPECT_EQ(t.take_out(9), 0u);
  t.advance_in(9);
  EXPECT_EQ(t.in(9), 1u);
  EXPECT_EQ(t.in(5), 0u);
}

TEST(ChannelTable, ACounterPastItsLowWidthGoesOn) {
  ChannelTable<std::uint8_t> t;
  for (std::uint64_t i = 0; i < 600; ++i) ASSERT_EQ(t.take_out(3), i);
  for (int i = 0; i < 700; ++i) t.advance_in(3);
  EXPECT_EQ(t.in(3), 700u);
  EXPECT_EQ(t.take_out(3), 600u);
  EXPECT_EQ(t.take_out(4), 0u);  // other peers keep their own counters
}

// Any sequence of operations on any peers gives what a map of 64-bit
// counters gives, across growth of the table and widening of counters.
RC_GTEST_PROP(ChannelTable, AgreesWithAMapOfCounters, ()) {
  const auto ops = *rc::gen::container<std::vector<std::pair<int, int>>>(
      rc::gen::pair(rc::gen::inRange(0, 3), rc::gen::oneOf(rc::gen::inRange(0, 40), rc::gen::inRange(0, 1 << 20))));
  ChannelTable<std::uint8_t> t;
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> ref;
  for (const auto& [what, peer] : ops) {
    // Runs of the same operation, to get counters past 8 bits.
    for (int k = 0; k < 97; ++k) {
      if (what == 0) RC_ASSERT(t.take_out(peer) == ref[peer].first++);
      else if (what == 1) {
        t.advance_in(peer);
        ++ref[peer].second;
      }
      else RC_ASSERT(t.in(peer) == (ref.count(peer) ? ref[peer].second : 0u));
    }
  }
  for (const auto& [peer, c] : ref) RC_ASSERT(t.in(peer) == c.second);
}

}  // namespace
}  // namespace collie
