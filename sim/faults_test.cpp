// Each fault type does what it says, deterministically, and reports and
// traces are reproducible. (That the core masks delays and reordering,
// checked against the oracle, is in conformance/property_test.cpp.)
#include "sim/faults.h"

#include <gtest/gtest.h>

#include <sstream>

#include "core/communicator.h"
#include "sim/sim_world.h"
#include "sim/testing.h"

namespace collie::sim {
namespace {

NetworkModel exact_model() {
  NetworkModel m;
  m.ranks_per_node = 0;
  m.intra = LinkModel{1.0, 10.0};  // 1000 ns + bytes/10
  m.reduce_GBps = 0;
  m.jitter_fraction = 0.0;
  return m;
}

FaultPlan plan_of(std::initializer_list<const char*> faults) {
  FaultPlan p;
  for (const char* f : faults) {
    auto err = parse_fault(f, p);
    EXPECT_FALSE(err) << *err;
  }
  return p;
}

// Rank 0 sends `n` messages of 40 bytes to rank 1 on tag i; returns the run.
SimResult pipeline(const FaultPlan& plan, int n = 3, NetworkModel m = exact_model(), std::uint64_t seed = 1) {
  SimOptions o;
  o.network = m;
  o.faults = plan;
  o.seed = seed;
  SimWorld w(2, o);
  return w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {10});
    for (int i = 0; i < n; ++i) {
      if (c.rank() == 0) co_await c.send(t, 1, i);
      else co_await c.recv(t, 0, i);
    }
  });
}

TEST(Faults, DropTheNthMessageLeavesItsReceiverWaitingAndSaysWhich) {
  SimOptions o;
  o.network = exact_model();
  o.faults = plan_of({"drop:src=0,dst=1,nth=2"});
  SimWorld w(2, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {10});
    for (int i = 0; i < 3; ++i) {
      if (c.rank() == 0) co_await c.send(t, 1, i);
      else co_await c.recv(t, 0, i);
    }
  });
  ASSERT_TRUE(res.deadlocked);
  EXPECT_EQ(res.blocked_ranks, std::vector<int>{1});
  ASSERT_EQ(w.simulator().fault_log().size(), 1u);
  EXPECT_EQ(w.simulator().fault_log()[0].kind, FaultRecord::Kind::kDrop);
  EXPECT_NE(res.deadlock_report.find("message 0->1 (tag 1) dropped by fault 'drop the 2nd message 0->1'"),
            std::string::npos)
      << res.deadlock_report;
  // The third message arrived but waits for the second: the report says so,
  // blaming the transport rather than the program.
  EXPECT_NE(res.deadlock_report.find("at rank 1: 1 frame from rank 0 held waiting for channel_seq 1 (held: 2)"),
            std::string::npos)
      << res.deadlock_report;
}

TEST(Faults, DropWithProbabilityIsDeterministicFromTheSeed) {
  const auto a = pipeline(plan_of({"drop:p=0.5"}), 8, exact_model(), 5);
  const auto b = pipeline(plan_of({"drop:p=0.5"}), 8, exact_model(), 5);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.deadlocked, b.deadlocked);
}

TEST(Faults, DelayAddsExactlyItsLatency) {
  // 40 bytes at 10 bytes/ns: 4 ns on the wire, plus 1 us of latency.
  EXPECT_EQ(pipeline({}, 1).end_time, 1004);
  EXPECT_EQ(pipeline(plan_of({"delay:us=7"}), 1).end_time, 1004 + 7000);
}

TEST(Faults, ReorderingIsMaskedByTheCore) {
  const auto r = pipeline(plan_of({"reorder:p=1,max_us=30"}), 6);
  EXPECT_TRUE(r.ok()) << r.describe();
}

// A transport that delivers a frame twice broke its contract: the core
// names it, instead of silently dropping the copy (which hid such bugs).
TEST(Faults, ADuplicatedFrameIsATransportErrorNamingTheFrame) {
  SimOptions o;
  o.network = exact_model();
  o.faults = plan_of({"duplicate:p=1"});
  SimWorld w(2, o);
  // Ping-pong: time passes, so the first message's copy arrives mid-run.
  const auto r = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {10});
    for (int i = 0; i < 6; ++i) {
      if (c.rank() == i % 2) co_await c.send(t, 1 - c.rank(), i);
      else co_await c.recv(t, 1 - c.rank(), i);
    }
  });
  EXPECT_FALSE(r.ok());
  const std::string d = r.describe();
  EXPECT_NE(d.find("transport"), std::string::npos) << d;
  EXPECT_NE(d.find("the transport broke its contract (core/transport.h): a frame delivered twice"), std::string::npos) << d;
  EXPECT_NE(d.find("channel_seq 0 from rank 1 was already delivered): eager frame from rank 1 to rank 0"), std::string::npos) << d;
}

TEST(Faults, PartitionLosesFramesInItsWindowOnlyAndOneWayOnlyOneWay) {
  // Rank 0 -> 1 cut for the first 100 us: the first message is lost.
  auto r = pipeline(plan_of({"partition:a=0,b=1,until_us=100"}), 1);
  EXPECT_TRUE(r.deadlocked);
  EXPECT_NE(r.deadlock_report.find("lost to a partition"), std::string::npos) << r.deadlock_report;
  // A window that has passed changes nothing.
  EXPECT_TRUE(pipeline(plan_of({"partition:a=0,b=1,from_us=50,until_us=60"}), 1).ok());
  // One way, the other direction: nothing lost.
  EXPECT_TRUE(pipeline(plan_of({"partition:a=1,b=0,one_way=1"}), 2).ok());
}

TEST(Faults, LinkDegradationScalesBandwidthAndAddsLatency) {
  // 40 bytes at 1 B/ns (x0.1) = 40 ns; +2 us.
  EXPECT_EQ(pipeline(plan_of({"degrade:scope=pair,a=0,b=1,bw=0.1,lat_us=2"}), 1).end_time, 1000 + 40 + 2000);
  // Inter-node degradation does not touch a single node.
  EXPECT_EQ(pipeline(plan_of({"degrade:scope=inter,bw=0.1"}), 1).end_time, 1004);
}

TEST(Faults, SlowRankSlowsItsNic) {
  EXPECT_EQ(pipeline(plan_of({"slow:rank=0,factor=5"}), 1).end_time, 1000 + 20);
}

TEST(Faults, CrashAtATimeAtAnOpAndAtAStep) {
  // Rank 0's eager send needs no receiver: it finishes, nothing waits for
  // the crashed rank 1, and the run ends there -- not ok, not a deadlock.
  auto at_time = pipeline(plan_of({"crash:rank=1,at_us=0"}), 1);
  EXPECT_FALSE(at_time.deadlocked);
  EXPECT_FALSE(at_time.ok());
  EXPECT_TRUE(at_time.ranks[0].finished);
  EXPECT_TRUE(at_time.ranks[1].crashed);
  EXPECT_EQ(at_time.describe(), "rank 1 crashed (an injected fault)");
  auto at_op = pipeline(plan_of({"crash:rank=0,op=2"}), 3);
  EXPECT_TRUE(at_op.deadlocked);
  EXPECT_NE(at_op.deadlock_report.find("rank 0 crashed by fault 'crash rank 0 at its 2nd op'"), std::string::npos)
      << at_op.deadlock_report;
  SimOptions o;
  o.faults = plan_of({"crash:rank=2,step=reduce_scatter 1"});
  SimWorld w(4, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1000});
    co_await c.all_reduce(t, ReduceOp::kSum, {}, {Algorithm::kRing});
  });
  EXPECT_TRUE(res.deadlocked);
  EXPECT_TRUE(w.simulator().crashed(2));
  EXPECT_NE(res.deadlock_report.find("step 'reduce_scatter"), std::string::npos) << res.deadlock_report;
}

TEST(Faults, ACrashWithDetectionFailsThePeersThatNeedItAtTheDetectionTime) {
  SimOptions o;
  o.network = exact_model();
  o.faults = plan_of({"crash:rank=3,op=1,detect_us=40"});
  // Ranks 0 and 1 all_reduce in one pair, ranks 2 and 3 in another.
  const auto pairs = [](Communicator& c) -> Task<void> {
    Group lo = c.new_group({0, 1});
    Group hi = c.new_group({2, 3});
    Tensor t(DType::kInt64, {4});
    co_await c.all_reduce(t, ReduceOp::kSum, c.rank() < 2 ? lo : hi);
  };
  SimWorld w(4, o);
  auto res = w.run(pairs);
  // Ranks 0 and 1 never needed rank 3: they finish. Rank 2 fails naming it,
  // once the crash is detected (40 us), not by hanging.
  EXPECT_FALSE(res.deadlocked) << res.deadlock_report;
  EXPECT_TRUE(res.ranks[0].finished && !res.ranks[0].error);
  EXPECT_TRUE(res.ranks[1].finished && !res.ranks[1].error);
  EXPECT_TRUE(res.ranks[3].crashed);
  EXPECT_EQ(testing::error_kind(res, 2), ErrorKind::kTransport);
  EXPECT_NE(testing::error_text(res, 2).find("lost rank 3: rank 3 crashed"), std::string::npos)
      << testing::error_text(res, 2);
  EXPECT_EQ(res.ranks[2].end_time, 40000);
  // Without detection the same crash is silent: a deadlock naming it.
  o.faults = plan_of({"crash:rank=3,op=1"});
  SimWorld silent(4, o);
  auto quiet = silent.run(pairs);
  EXPECT_TRUE(quiet.deadlocked);
  EXPECT_NE(quiet.deadlock_report.find("rank 3 crashed"), std::string::npos) << quiet.deadlock_report;
}

TEST(Timeouts, NameTheOpTheStepAndThePeersStillAwaited) {
  SimOptions o;
  o.default_timeout_ns = 20000;
  o.faults = plan_of({"crash:rank=3,op=1"});  // before it sends anything
  SimWorld w(4, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {8});
    co_await c.all_reduce(t, ReduceOp::kSum, {}, {Algorithm::kRecursiveDoubling});
  });
  EXPECT_EQ(testing::error_kind(res, 2), ErrorKind::kTimeout);
  const std::string e = testing::error_text(res, 2);
  EXPECT_NE(e.find("rank 2, all_reduce #1 on world (peer 3): did not complete within 20 us (at algorithm step "
                   "'exchange 0'); still waiting for rank 3 (tag 2, float32 x 8 (32 bytes))"),
            std::string::npos)
      << e;
}

TEST(Timeouts, PerCallAndPerGroupTimeoutsOverrideTheDefault) {
  SimWorld w(2);
  std::vector<std::string> errors;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({0, 1}, /*timeout_ns=*/5000);
    Tensor t(DType::kFloat32, {1});
    if (c.rank() != 1) co_return;  // rank 0 never joins
    for (Nanos per_call : {Nanos{0}, Nanos{7000}}) {
      try {
        co_await c.all_reduce(t, ReduceOp::kSum, g, {Algorithm::kAuto, per_call});
        errors.push_back("completed");
      } catch (const Error& e) {
        errors.push_back(std::string(error_kind_name(e.kind())) + ": " + e.what());
      }
    }
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("all_reduce #1 on group 1 {0,1} (peer 0): did not complete within 5 us"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("all_reduce #2 on group 1 {0,1} (peer 0): did not complete within 7 us"), std::string::npos)
      << errors[1];
}

TEST(Timeouts, ClockSkewMakesARanksTimeoutFireEarly) {
  auto run = [](const char* skew) {
    SimOptions o;
    o.default_timeout_ns = 100000;
    if (skew) o.faults = plan_of({skew});
    SimWorld w(2, o);
    Tensor t(DType::kFloat32, {1});
    Work r = w.comm(1).irecv(t, 0);
    auto res = w.run([&](Communicator&) -> Task<void> { co_return; });
    (void)res;
    try {
      r.wait();
    } catch (const Error&) {
    }
    return w.simulator().now();
  };
  EXPECT_EQ(run(nullptr), 100000);
  EXPECT_EQ(run("skew:rank=1,rate=2"), 50000);  // its clock runs twice as fast
}

// ---- reproducibility ----------------------------------------------------------

std::pair<std::string, std::string> report_and_trace(std::uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.trace = true;
  o.faults = plan_of({"crash:rank=2,op=1", "delay:p=0.5,mean_us=3"});
  o.replay = "collie run x.yaml --seed " + std::to_string(seed);
  SimWorld w(5, o);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {100});
    co_await c.all_reduce(t);
    co_await c.broadcast(t, 1);
  });
  std::ostringstream trace;
  w.simulator().trace()->write_chrome_json(trace, res.stopped_at);
  return {res.deadlock_report + res.deadlock_dot, trace.str()};
}

TEST(Reproducibility, SameSeedGivesByteIdenticalReportAndTrace) {
  const auto a = report_and_trace(9), b = report_and_trace(9);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
  EXPECT_NE(a.first.find("replay: collie run x.yaml --seed 9"), std::string::npos) << a.first;
  EXPECT_NE(a.second.find("\"cat\":\"fault\""), std::string::npos);
  EXPECT_NE(a.second.find("\"ph\":\"s\""), std::string::npos);  // message flows
  EXPECT_NE(a.second.find("\"cat\":\"step\""), std::string::npos);
}

TEST(FaultParsing, RoundTripsThroughTheCommandLineForm) {
  FaultPlan p = plan_of({"drop:src=0,dst=1,nth=3", "delay:p=0.5,mean_us=4", "reorder:p=0.2,max_us=9",
                         "partition:a=0+1,b=2,from_us=1,until_us=9,one_way=1", "degrade:scope=node,a=1,bw=0.5",
                         "crash:rank=2,step=all_gather", "crash:rank=3,op=2,detect_us=7.5", "slow:rank=1,factor=3",
                         "skew:rank=0,rate=1.5,offset_us=2"});
  FaultPlan q;
  for (const auto& a : fault_args(p)) ASSERT_FALSE(parse_fault(a, q)) << a;
  EXPECT_EQ(fault_args(p), fault_args(q));
  EXPECT_EQ(q.describe(), p.describe());
  FaultPlan bad;
  EXPECT_EQ(*parse_fault("drop:srcc=1", bad), "fault 'drop:srcc=1': unknown key 'srcc'");
  EXPECT_EQ(*parse_fault("explode", bad),
            "unknown fault 'explode' (drop, delay, duplicate, reorder, partition, degrade, crash, slow, skew)");
}

}  // namespace
}  // namespace collie::sim
