// The event queue pops exactly as a plain priority queue over (time,
// tiebreak, order) does, for any sequence of pushes, pops and take_all()s.
#include "sim/event_queue.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

namespace collie::sim {
namespace {

struct Before {
  bool operator()(const Event& a, const Event& b) const { return runs_before(a, b); }
};

// One step of a random workload: push an event `dt` after the last popped
// time (negative: before it, as nothing in the simulator does but the
// queue must still order), pop, or take everything and push it back.
struct Op {
  int what = 0;  // 0..5 push, 6..8 pop, 9 take_all
  std::int64_t dt = 0;
  std::uint64_t tiebreak = 0;
};

RC_GTEST_PROP(EventQueue, PopsInTimeTiebreakOrderOrder, ()) {
  const auto ops = *rc::gen::container<std::vector<Op>>(rc::gen::build<Op>(
      rc::gen::set(&Op::what, rc::gen::inRange(0, 10)),
      rc::gen::set(&Op::dt, rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-3, 4),
                                          rc::gen::inRange<std::int64_t>(0, 1 << 20),
                                          rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 45))),
      // Few distinct tiebreaks, so that order decides ties too.
      rc::gen::set(&Op::tiebreak, rc::gen::inRange<std::uint64_t>(0, 4))));
  EventQueue q;
  std::set<Event, Before> ref;
  std::uint64_t order = 0;
  Nanos last = 0;
  for (const Op& op : ops) {
    if (op.what < 6) {
      Event e;
      e.time = std::max<Nanos>(0, last + op.dt);
      e.tiebreak = op.tiebreak;
      e.order = order++;
      q.push(e);
      ref.insert(e);
    } else if (op.what < 9) {
      if (ref.empty()) continue;
      RC_ASSERT(q.top().order == ref.begin()->order);
      const Event e = q.pop();
      RC_ASSERT(e.order == ref.begin()->order);
      RC_ASSERT(e.time == ref.begin()->time);
      ref.erase(ref.begin());
      last = e.time;
    } else {
      std::vector<Event> all = q.take_all();
      RC_ASSERT(q.empty());
      RC_ASSERT(all.size() == ref.size());
      for (const Event& e : all) q.push(e);
    }
    RC_ASSERT(q.size() == ref.size());
  }
  while (!ref.empty()) {
    RC_ASSERT(q.pop().order == ref.begin()->order);
    ref.erase(ref.begin());
  }
  RC_ASSERT(q.empty());
}

TEST(EventQueue, EventsOfOneTimeRunByTiebreakEvenWhenPushedWhileThatTimeRuns) {
  EventQueue q;
  q.push(Event{10, 5, 0});
  q.push(Event{10, 7, 1});
  q.push(Event{20, 1, 2});
  EXPECT_EQ(q.pop().order, 0u);  // time 10 is now current
  q.push(Event{10, 6, 3});       // pushed at the current time: runs before the pending (10, 7)
  q.push(Event{10, 2, 4});
  EXPECT_EQ(q.pop().order, 4u);
  EXPECT_EQ(q.pop().order, 3u);
  EXPECT_EQ(q.pop().order, 1u);
  EXPECT_EQ(q.pop().order, 2u);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, UpcomingNamesTheNextPopsOfTheCurrentTimeBatch) {
  EventQueue q;
  const std::uint64_t tiebreaks[] = {9, 3, 7, 1, 8, 2};
  std::uint64_t order = 0;
  for (std::uint64_t t : tiebreaks) q.push(Event{10, t, order++});
  q.push(Event{20, 0, order++});
  EXPECT_EQ(q.upcoming(0), nullptr);  // nothing sorted before the first refill
  EXPECT_EQ(q.pop().tiebreak, 1u);    // time 10 becomes the current batch
  std::vector<std::uint64_t> ahead;
  for (std::size_t i = 0; q.upcoming(i); ++i) ahead.push_back(q.upcoming(i)->order);
  ASSERT_EQ(ahead.size(), 5u);  // the rest of time 10, not time 20's event
  for (std::uint64_t o : ahead) EXPECT_EQ(q.pop().order, o);
  EXPECT_EQ(q.upcoming(0), nullptr);
  EXPECT_EQ(q.pop().time, 20);
}

}  // namespace
}  // namespace collie::sim
