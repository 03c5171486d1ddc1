// Point-to-point semantics and every point-to-point error, on the simulator.
#include <gtest/gtest.h>

#include "core/communicator.h"
#include "sim/sim_world.h"
#include "sim/testing.h"

namespace collie {
namespace {

using sim::testing::error_kind;
using sim::testing::error_text;

Tensor scalar(DType dt = DType::kFloat32, double v = 0) {
  Tensor t(dt, {1});
  t.set(0, v);
  return t;
}

// The seeds' blocking example: rank 0 sends 1.0 to rank 1.
TEST(PointToPoint, BlockingSendRecv) {
  sim::SimWorld w(2);
  double got[2] = {-1, -1};
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t = scalar();
    if (c.rank() == 0) {
      t.set(0, t.get(0) + 1);
      co_await c.send(t, 1);
    } else {
      co_await c.recv(t, 0);
    }
    got[c.rank()] = t.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(got[0], 1.0);
  EXPECT_EQ(got[1], 1.0);
}

// The seeds' non-blocking example: before wait() the receive may not have
// happened; after it, it has.
TEST(PointToPoint, IsendIrecvCompleteAfterWait) {
  sim::SimWorld w(2);
  bool completed_before_wait = true;
  double after = -1;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t = scalar();
    Work req;
    if (c.rank() == 0) {
      t.set(0, 1);
      req = c.isend(t, 1);
    } else {
      req = c.irecv(t, 0);
      completed_before_wait = req.is_completed();
    }
    co_await req;
    if (c.rank() == 1) after = t.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_FALSE(completed_before_wait);  // the message needs virtual time to travel
  EXPECT_EQ(after, 1.0);
}

// Seed 004's ping-pong: 0 -> 1, +1, 1 -> 0.
TEST(PointToPoint, PingPong) {
  sim::SimWorld w(2);
  double final0 = 0;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t = scalar();
    if (c.rank() == 0) {
      t.set(0, 1);
      co_await c.send(t, 1);
      co_await c.recv(t, 1);
      final0 = t.get(0);
    } else {
      co_await c.recv(t, 0);
      t.set(0, t.get(0) + 1);
      co_await c.send(t, 0);
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(final0, 2.0);
}

TEST(PointToPoint, AnySourceReturnsTheSendersGlobalRank) {
  sim::SimWorld w(4);
  std::vector<int> sources;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t = scalar(DType::kInt32, c.rank());
    if (c.rank() == 2) {
      for (int i = 0; i < 3; ++i) {
        Work r = c.recv(t, kAnySource);
        co_await r;
        EXPECT_EQ(static_cast<int>(t.get(0)), r.source_rank());
        sources.push_back(r.source_rank());
      }
    } else {
      co_await c.send(t, 2);
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  std::sort(sources.begin(), sources.end());
  EXPECT_EQ(sources, (std::vector<int>{0, 1, 3}));
}

TEST(PointToPoint, TagsSelectMessagesOutOfArrivalOrder) {
  sim::SimWorld w(2);
  double a = 0, b = 0;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    if (c.rank() == 0) {
      Tensor x = scalar(DType::kFloat32, 10), y = scalar(DType::kFloat32, 20);
      co_await c.send(x, 1, /*tag=*/1);
      co_await c.send(y, 1, /*tag=*/2);
    } else {
      Tensor x = scalar(), y = scalar();
      co_await c.recv(y, 0, 2);  // posted first, matches the second message
      co_await c.recv(x, 0, 1);
      a = x.get(0);
      b = y.get(0);
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(a, 10.0);
  EXPECT_EQ(b, 20.0);
}

TEST(PointToPoint, IsendToSelfMatchesALocalIrecv) {
  sim::SimWorld w(1);
  double got = 0;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor big(DType::kFloat64, {100000});  // larger than the eager threshold
    big.set(99999, 7);
    Tensor out(DType::kFloat64, {100000});
    Work r = c.irecv(out, 0);
    Work s = c.isend(big, 0);
    co_await s;
    co_await r;
    got = out.get(99999);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(got, 7.0);
}

TEST(PointToPointError, BlockingSendToSelfIsAnError) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t = scalar();
    if (c.rank() == 1) co_await c.send(t, 1);
  });
  EXPECT_EQ(error_kind(res, 1), ErrorKind::kInvalidArgument);
  EXPECT_NE(error_text(res, 1).find("blocking send to itself"), std::string::npos) << error_text(res, 1);
  EXPECT_NE(error_text(res, 1).find("rank 1"), std::string::npos);
}

TEST(PointToPointError, ReceiveBufferSmallerThanMessageNamesSenderTagAndBothSizes) {
  for (std::size_t n : {std::size_t{2}, std::size_t{40000}}) {  // eager and rendezvous
    sim::SimWorld w(2);
    auto res = w.run([&](Communicator& c) -> Task<void> {
      if (c.rank() == 0) {
        Tensor t(DType::kFloat32, {static_cast<std::int64_t>(n)});
        co_await c.send(t, 1, 7);
      } else {
        Tensor t(DType::kFloat32, {1});
        co_await c.recv(t, 0, 7);
      }
    });
    EXPECT_EQ(error_kind(res, 1), ErrorKind::kSizeMismatch);
    const std::string e = error_text(res, 1);
    EXPECT_NE(e.find("from rank 0 (tag 7)"), std::string::npos) << e;
    EXPECT_NE(e.find("float32 x " + std::to_string(n) + " (" + std::to_string(4 * n) + " bytes)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("float32 x 1 (4 bytes)"), std::string::npos) << e;
    if (n > 2) {
      // Rendezvous: the sender learns of it too instead of hanging.
      EXPECT_EQ(error_kind(res, 0), ErrorKind::kSizeMismatch) << error_text(res, 0);
      EXPECT_NE(error_text(res, 0).find("rank 1 refused the message"), std::string::npos) << error_text(res, 0);
    } else {
      EXPECT_EQ(error_text(res, 0), "");
    }
  }
}

TEST(PointToPointError, DTypeMismatchIsAnErrorNotAReinterpretation) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    if (c.rank() == 0) {
      Tensor t(DType::kInt32, {2});
      co_await c.send(t, 1);
    } else {
      Tensor t(DType::kFloat32, {2});  // same byte count
      co_await c.recv(t, 0);
    }
  });
  EXPECT_EQ(error_kind(res, 1), ErrorKind::kDTypeMismatch);
  EXPECT_NE(error_text(res, 1).find("is int32 x 2 (8 bytes) but the receive buffer is float32 x 2"),
            std::string::npos)
      << error_text(res, 1);
}

TEST(PointToPointError, NegativeTagOutOfRangePeerAndNonMemberPeer) {
  sim::SimWorld w(3);
  std::vector<std::string> errors;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({0, 1});
    if (c.rank() != 0) co_return;
    Tensor t = scalar();
    for (auto f : std::vector<std::function<Work()>>{
             [&] { return c.send(t, 1, -1); },
             [&] { return c.send(t, 3); },
             [&] { return c.recv(t, -5); },
             [&] { return c.isend(t, 2, 0, g); },
         }) {
      try {
        (void)f();
        errors.push_back("no error");
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        errors.push_back(e.what());
      }
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_NE(errors[0].find("tag -1 is negative"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("dst 3 is out of range for world size 3"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("src -5 is out of range"), std::string::npos) << errors[2];
  EXPECT_NE(errors[3].find("dst 2 is not a member of group 1 {0,1}"), std::string::npos) << errors[3];
}

TEST(PointToPointError, ErrorsNameTheOpAndItsSequenceNumberInTheGroup) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor one = scalar(), two(DType::kFloat32, {2});
    if (c.rank() == 0) {
      co_await c.send(one, 1);
      co_await c.send(two, 1);
    } else {
      co_await c.recv(one, 0);
      co_await c.recv(one, 0);  // the second receive is #2 on world
    }
  });
  EXPECT_NE(error_text(res, 1).find("rank 1, recv #2 on world (peer 0)"), std::string::npos) << error_text(res, 1);
}

TEST(PointToPointDeadlock, HeadToHeadSendsAboveTheEagerThresholdDeadlockAndAreReported) {
  sim::SimOptions o;
  o.network.eager_threshold_bytes = 1024;
  sim::SimWorld w(2, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor out(DType::kFloat32, {1000}), in(DType::kFloat32, {1000});
    co_await c.send(out, 1 - c.rank());
    co_await c.recv(in, 1 - c.rank());
  });
  EXPECT_TRUE(res.deadlocked);
  EXPECT_NE(res.deadlock_report.find("2 of 2 ranks are blocked"), std::string::npos) << res.deadlock_report;
  EXPECT_NE(res.deadlock_report.find("send #1 on world: waits for rank 1 to post a matching receive (rendezvous "
                                     "send, tag 0, float32 x 1000 (4000 bytes))"),
            std::string::npos)
      << res.deadlock_report;
  EXPECT_NE(res.deadlock_report.find("wait-for cycle: 0 -> 1 -> 0 (each rank is blocked in a send the next one "
                                     "never receives"),
            std::string::npos)
      << res.deadlock_report;
}

TEST(PointToPointDeadlock, TheSameSendsBelowTheThresholdComplete) {
  sim::SimOptions o;
  o.network.eager_threshold_bytes = 4000;
  sim::SimWorld w(2, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor out(DType::kFloat32, {1000}), in(DType::kFloat32, {1000});
    co_await c.send(out, 1 - c.rank());
    co_await c.recv(in, 1 - c.rank());
  });
  EXPECT_TRUE(res.ok()) << res.describe();
}

// Regression: the report named the lowest failed rank, a peer that timed
// out on a receiver which had failed at once (Gloo's empty any-source
// receive), not the failure that caused it.
TEST(RunResult, DescribesTheErrorThatEndedFirst) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const Group g = c.new_group({0, 1}, 5'000'000);
    if (c.rank() == 1) throw std::runtime_error("rank 1 failed at once");
    Tensor t = scalar();
    co_await c.recv(t, 1, 0, g);
  });
  ASSERT_FALSE(res.ok());
  ASSERT_TRUE(res.ranks[0].error);
  EXPECT_EQ(res.describe(), "rank 1 failed at once");
}

}  // namespace
}  // namespace collie
