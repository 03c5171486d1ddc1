// The simulator's cost model, buffering, determinism and its refusal to hang.
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "core/communicator.h"
#include "sim/sim_world.h"
#include "sim/testing.h"

namespace collie::sim {
namespace {

NetworkModel exact_model() {
  NetworkModel m;
  m.ranks_per_node = 2;
  m.intra = LinkModel{1.0, 10.0};   // 1000 ns, 10 bytes/ns
  m.inter = LinkModel{10.0, 1.0};   // 10000 ns, 1 byte/ns
  m.reduce_GBps = 2.0;              // 2 bytes/ns
  m.jitter_fraction = 0.0;
  m.eager_threshold_bytes = 1 << 20;
  return m;
}

SimResult one_message(int src, int dst, int world, std::size_t floats, NetworkModel m) {
  SimOptions o;
  o.network = m;
  SimWorld w(world, o);
  return w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {static_cast<std::int64_t>(floats)});
    if (c.rank() == src) co_await c.send(t, dst);
    if (c.rank() == dst) co_await c.recv(t, src);
  });
}

// A frame's payload copy and its trace record live beside the frame's slot
// (Simulator::InFlight keeps only the header and the large payload's
// address): both must follow the slot, for eager and rendezvous messages.
TEST(FramesInFlight, PayloadsArriveAndEveryDeliveredFrameHasATraceArrow) {
  NetworkModel m = exact_model();
  m.eager_threshold_bytes = 256;  // 64 floats eager, 1000 floats rendezvous (RTS, CTS, data)
  SimOptions o;
  o.network = m;
  o.trace = true;
  SimWorld w(4, o);
  std::vector<float> got;
  const SimResult res = w.run([&](Communicator& c) -> Task<void> {
    for (std::size_t floats : {std::size_t{64}, std::size_t{1000}}) {
      Tensor t(DType::kFloat32, {static_cast<std::int64_t>(floats)});
      if (c.rank() == 0) {
        for (std::size_t i = 0; i < floats; ++i) t.as<float>()[i] = static_cast<float>(i) + 0.5f;
        co_await c.send(t, 2);
      }
      if (c.rank() == 2) {
        co_await c.recv(t, 0);
        got.insert(got.end(), t.as<float>(), t.as<float>() + floats);
      }
    }
  });
  ASSERT_EQ(got.size(), 1064u);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(got[i], static_cast<float>(i) + 0.5f) << i;
  for (std::size_t i = 0; i < 1000; ++i) EXPECT_EQ(got[64 + i], static_cast<float>(i) + 0.5f) << i;
  std::ostringstream json;
  w.simulator().trace()->write_chrome_json(json, w.simulator().now());
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = json.str().find(what); at != std::string::npos; at = json.str().find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(w.simulator().frames_delivered(), 4u);  // eager; RTS, CTS, data
  EXPECT_EQ(count("\"ph\":\"s\""), 4u) << json.str();
  EXPECT_EQ(count("\"ph\":\"f\""), 4u) << json.str();
  for (int id = 1; id <= 4; ++id) EXPECT_EQ(count("\"id\":" + std::to_string(id) + ","), 2u) << id;
  (void)res;
}

TEST(CostModel, OneMessageCostsAlphaPlusBytesTimesBeta) {
  // 4000 bytes inside a node: 1000 + 4000/10.
  EXPECT_EQ(one_message(0, 1, 4, 1000, exact_model()).ranks[1].end_time, 1400);
  // Across nodes: 10000 + 4000/1.
  EXPECT_EQ(one_message(0, 2, 4, 1000, exact_model()).ranks[2].end_time, 14000);
  // An eager send completes when its bytes are injected: 4000 ns.
  EXPECT_EQ(one_message(0, 2, 4, 1000, exact_model()).ranks[0].end_time, 4000);
}

TEST(CostModel, ANicSendsOneMessageAtATime) {
  SimOptions o;
  o.network = exact_model();
  o.network.ranks_per_node = 0;  // one node
  SimWorld w(3, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1000});
    if (c.rank() == 0) {
      Work a = c.isend(t, 1);
      Work b = c.isend(t, 2);
      co_await a;
      co_await b;
    } else {
      co_await c.recv(t, 0);
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(res.ranks[1].end_time, 1400);        // first on the wire
  EXPECT_EQ(res.ranks[2].end_time, 400 + 1400);  // waits for the first injection
}

TEST(CostModel, RendezvousCostsThreeLatencies) {
  NetworkModel m = exact_model();
  m.eager_threshold_bytes = 100;
  // RTS (1000) + CTS (1000) + DATA (1000 + 400).
  EXPECT_EQ(one_message(0, 1, 2, 1000, m).ranks[1].end_time, 3400);
}

TEST(CostModel, ReductionsCostGammaPerByte) {
  SimOptions o;
  o.network = exact_model();
  SimWorld w(2, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1000});
    co_await c.all_reduce(t, ReduceOp::kSum, {}, {Algorithm::kRecursiveDoubling});
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  // One exchange (1000 + 400), then 4000 bytes reduced at 2 bytes/ns.
  EXPECT_EQ(res.ranks[0].end_time, 1400 + 2000);
  EXPECT_EQ(res.end_time, 3400);
}

TEST(Determinism, TraceHashDependsOnTheSeedAndOnlyOnIt) {
  auto hash = [](std::uint64_t seed) {
    SimOptions o;
    o.seed = seed;
    SimWorld w(9, o);
    auto res = w.run([&](Communicator& c) -> Task<void> {
      Tensor t(DType::kFloat32, {5000});
      co_await c.all_reduce(t);
      co_await c.barrier();
    });
    return res.trace_hash;
  };
  EXPECT_EQ(hash(5), hash(5));
  EXPECT_NE(hash(5), hash(6));
}

TEST(Simulator, AnEmptyQueueWithAPendingWaitIsADeadlockNotAHang) {
  Simulator sim(2, 1, NetworkModel{});
  bool never = false;
  try {
    sim.run_until([&] { return never; }, std::nullopt);
    ADD_FAILURE() << "returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDeadlock);
  }
}

TEST(Simulator, ReportsVirtualEndTimePerRank) {
  SimOptions o;
  o.network = exact_model();
  SimWorld w(4, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {10});
    if (c.rank() == 3) co_await c.recv(t, 0);
    if (c.rank() == 0) co_await c.send(t, 3);
  });
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res.ranks[1].end_time, 0);
  EXPECT_EQ(res.ranks[3].end_time, 10040);
  EXPECT_EQ(res.end_time, 10040);
}

TEST(Simulator, DeadlockReportNamesEveryBlockedRankAndUnreceivedMessages) {
  SimWorld w(3);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kInt32, {2});
    if (c.rank() == 0) co_await c.send(t, 1, 9);         // tag 9: nobody receives it
    if (c.rank() == 1) co_await c.recv(t, 0, 8);         // waits for tag 8
    if (c.rank() == 2) co_await c.recv(t, kAnySource, 1);
  });
  ASSERT_TRUE(res.deadlocked);
  const std::string& r = res.deadlock_report;
  EXPECT_NE(r.find("2 of 3 ranks are blocked"), std::string::npos) << r;
  EXPECT_NE(r.find("rank 1:\n    recv #1 on world: waits for a message from rank 0 (tag 8"), std::string::npos) << r;
  EXPECT_NE(r.find("waits for a message from any rank (tag 1"), std::string::npos) << r;
  EXPECT_NE(r.find("rank 0 finished without sending what rank 1 waits for in recv #1 on world (it did send tag 9 "
                   "here, which nobody received: a tag mismatch?)"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("at rank 1: message from rank 0 (tag 9, int32 x 2 (8 bytes), on world) was never received"),
            std::string::npos)
      << r;
}

}  // namespace
}  // namespace collie::sim
