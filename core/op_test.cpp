// The op table (core/op.h) and the enums whose every value must be handled:
// a value added without its row, its name or its dispatch fails here (or
// does not compile).
#include <gtest/gtest.h>

#include <set>

#include "core/algorithm.h"
#include "core/communicator.h"
#include "core/error.h"
#include "core/group.h"
#include "core/op.h"
#include "sim/sim_world.h"
#include "sim/testing.h"

namespace collie {
namespace {

using sim::testing::error_kind;
using sim::testing::error_text;

TEST(OpTable, EveryRowParsesBackByItsNamesAndHasWhatItsFamilyNeeds) {
  std::set<std::string> names;
  for (const OpSpec& s : op_table()) {
    EXPECT_EQ(&op_spec(s.kind), &s);
    ASSERT_TRUE(parse_op(s.name)) << s.name;
    EXPECT_EQ(parse_op(s.name)->kind, s.kind);
    EXPECT_FALSE(parse_op(s.name)->async);
    EXPECT_TRUE(names.insert(std::string(s.name)).second) << s.name << " is named twice";
    if (!s.async_name.empty()) {
      EXPECT_EQ(parse_op(s.async_name)->kind, s.kind);
      EXPECT_TRUE(parse_op(s.async_name)->async);
      EXPECT_TRUE(names.insert(std::string(s.async_name)).second);
    }
    EXPECT_TRUE(s.blocking || s.async) << s.name;
    EXPECT_EQ(s.family == OpFamily::kCollective, s.collective != CollectiveKind::kNone) << s.name;
    if (s.rooted) {
      EXPECT_FALSE(s.peer_key.empty()) << s.name;
    }
    for (const Operand& o : s.operands) {
      if (o.present()) {
        EXPECT_TRUE(o.reads != Ranks::kNone || o.writes != Ranks::kNone) << s.name;
      }
    }
    // Every forced algorithm an op takes implements its collective.
    if (s.algorithm) {
      EXPECT_FALSE(algorithms_for(s.collective).empty()) << s.name;
    }
  }
  EXPECT_EQ(names.size(), op_names().size());
  EXPECT_FALSE(parse_op("allreduce"));
}

// What dispatch() called, by a Dist that records instead of running.
class RecordingDist final : public Dist {
 public:
  std::string called;
  DistCall seen;
  int rank() const override { return 0; }
  int world_size() const override { return 4; }
  Executor& executor() override { throw std::logic_error("no executor"); }
  Group world() const override { return {}; }
  Group new_group(std::vector<int>, Nanos, std::string) override { return {}; }
  void destroy_group(const Group&) override {}
  Work send(TensorView t, int dst, int tag, const Group&, Nanos to) override { return p2p("send", t, dst, tag, to); }
  Work isend(TensorView t, int dst, int tag, const Group&, Nanos to, Nanos poll) override {
    return p2p("isend", t, dst, tag, to, poll);
  }
  Work recv(TensorView t, int src, int tag, const Group&, Nanos to) override { return p2p("recv", t, src, tag, to); }
  Work irecv(TensorView t, int src, int tag, const Group&, Nanos to, Nanos poll) override {
    return p2p("irecv", t, src, tag, to, poll);
  }
  Work broadcast(TensorView t, int src, const Group&, CollectiveOptions o) override {
    return one("broadcast", t, src, o);
  }
  Work reduce(TensorView t, int dst, ReduceOp op, const Group&, CollectiveOptions o) override {
    seen.reduce_op = op;
    return one("reduce", t, dst, o);
  }
  Work all_reduce(TensorView t, ReduceOp op, const Group&, CollectiveOptions o) override {
    seen.reduce_op = op;
    return one("all_reduce", t, -1, o);
  }
  Work scatter(TensorView out, int src, std::span<const TensorView> l, const Group&, CollectiveOptions o) override {
    seen.list.assign(l.begin(), l.end());
    return one("scatter", out, src, o);
  }
  Work gather(TensorView in, int dst, std::span<const TensorView> l, const Group&, CollectiveOptions o) override {
    seen.list.assign(l.begin(), l.end());
    return one("gather", in, dst, o);
  }
  Work all_gather(std::span<const TensorView> l, TensorView in, const Group&, CollectiveOptions o) override {
    seen.list.assign(l.begin(), l.end());
    return one("all_gather", in, -1, o);
  }
  Work all_gather_into_tensor(TensorView out, TensorView in, const Group&, CollectiveOptions o) override {
    seen.output = out;
    return one("all_gather_into_tensor", in, -1, o);
  }
  Work reduce_scatter(TensorView out, std::span<const TensorView> l, ReduceOp op, const Group&,
                      CollectiveOptions o) override {
    seen.list.assign(l.begin(), l.end());
    seen.reduce_op = op;
    seen.output = out;
    return one("reduce_scatter", {}, -1, o);
  }
  Work reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group&, CollectiveOptions o) override {
    seen.reduce_op = op;
    seen.output = out;
    return one("reduce_scatter_tensor", in, -1, o);
  }
  Work all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group&,
                  CollectiveOptions o) override {
    seen.output_list.assign(out.begin(), out.end());
    seen.list.assign(in.begin(), in.end());
    return one("all_to_all", {}, -1, o);
  }
  Work all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> os,
                         std::span<const std::size_t> is, const Group&, CollectiveOptions o) override {
    seen.output = out;
    seen.output_splits.assign(os.begin(), os.end());
    seen.input_splits.assign(is.begin(), is.end());
    return one("all_to_all_single", in, -1, o);
  }
  Work barrier(const Group&, CollectiveOptions o) override { return one("barrier", {}, -1, o); }
  Work monitored_barrier(const Group&, Nanos timeout_ns, bool wait_all) override {
    seen.timeout_ns = timeout_ns;
    seen.wait_all_ranks = wait_all;
    called = "monitored_barrier";
    return {};
  }
  Work batch_isend_irecv(std::span<const P2POp> ops, const Group&) override {
    seen.p2p.assign(ops.begin(), ops.end());
    called = "batch_isend_irecv";
    return {};
  }

 private:
  Work p2p(const char* name, TensorView t, int peer, int tag, Nanos timeout_ns, Nanos poll_ns = 0) {
    called = name;
    seen.tensor = t;
    seen.peer = peer;
    seen.tag = tag;
    seen.timeout_ns = timeout_ns;
    seen.poll_ns = poll_ns;
    return {};
  }
  Work one(const char* name, TensorView t, int peer, CollectiveOptions o) {
    called = name;
    seen.tensor = t;
    seen.peer = peer;
    seen.async = o.async_op;
    seen.algorithm = o.algorithm;
    seen.timeout_ns = o.timeout_ns;
    seen.poll_ns = o.poll_ns;
    return {};
  }
};

// Every op, blocking and async, reaches the Dist method torch names it
// by, with every argument the call carries.
TEST(OpTable, DispatchCallsTheMethodOfEveryOpWithItsArguments) {
  float a = 0, b = 0, c = 0;
  const TensorView ta{&a, DType::kFloat32, 1}, tb{&b, DType::kFloat32, 1}, tc{&c, DType::kFloat32, 1};
  for (const OpSpec& s : op_table()) {
    for (bool async : {false, true}) {
      if ((async && !s.async) || (!async && !s.blocking)) continue;
      RecordingDist d;
      DistCall call;
      call.kind = s.kind;
      call.async = async;
      call.peer = s.peer_key.empty() ? -1 : 2;
      call.tag = s.tag ? 9 : 0;
      call.reduce_op = ReduceOp::kMax;
      call.timeout_ns = 1234;
      call.poll_ns = 5678;
      call.wait_all_ranks = true;
      call.tensor = ta;
      call.output = tb;
      call.list = {tb, tc};
      call.output_list = {tc, ta};
      call.output_splits = {1, 0};
      call.input_splits = {0, 1};
      call.p2p = {P2POp{true, ta, 1, 3}, P2POp{false, tb, 2, 4}};
      (void)dispatch(d, call);
      EXPECT_EQ(d.called, std::string(op_name(s.kind, async)));
      if (s.operand(Slot::kTensor).present()) {
        EXPECT_EQ(d.seen.tensor.data, ta.data) << s.name;
      }
      if (s.operand(Slot::kOutput).present() && !s.operand(Slot::kOutput).is_list()) {
        EXPECT_EQ(d.seen.output.data, tb.data) << s.name;
      }
      if (s.operand(Slot::kList).present()) {
        EXPECT_EQ(d.seen.list.size(), 2u) << s.name;
      }
      if (!s.peer_key.empty()) {
        EXPECT_EQ(d.seen.peer, 2) << s.name;
      }
      if (s.tag) {
        EXPECT_EQ(d.seen.tag, 9) << s.name;
      }
      if (s.reduce_op) {
        EXPECT_EQ(d.seen.reduce_op, ReduceOp::kMax) << s.name;
      }
      if (s.splits) {
        EXPECT_EQ(d.seen.output_splits, (std::vector<std::size_t>{1, 0})) << s.name;
      }
      if (s.timeout) {
        EXPECT_EQ(d.seen.timeout_ns, 1234) << s.name;
      }
      if (s.family == OpFamily::kBatch) {
        EXPECT_EQ(d.seen.p2p.size(), 2u);
      }
      // An async op is polled as asked (isend and irecv too); a blocking one
      // is awaited at once.
      if (async && s.family != OpFamily::kBatch) {
        EXPECT_EQ(d.seen.poll_ns, 5678) << s.name;
      }
      if (s.family == OpFamily::kCollective && s.async) {
        EXPECT_EQ(d.seen.async, async) << s.name;
      }
    }
  }
}

// The three traps that failed silently: every named value must parse and
// be counted.
TEST(EnumsWithoutGaps, EveryNamedAlgorithmParsesAndEveryCollectiveKindIsCounted) {
  int named = 0;
  for (int i = 0; i < 256; ++i) {
    const auto a = static_cast<Algorithm>(i);
    const std::string_view n = algorithm_name(a);
    if (n == "?") continue;
    ++named;
    ASSERT_TRUE(parse_algorithm(n)) << n;
    EXPECT_EQ(*parse_algorithm(n), a);
  }
  EXPECT_EQ(named, static_cast<int>(Algorithm::kPairwise) + 1);
  for (int i = 0; i < 256; ++i) {
    const auto k = static_cast<CollectiveKind>(i);
    EXPECT_EQ(is_collective_kind(k), i < kNumCollectiveKinds) << i;
    if (i < kNumCollectiveKinds) {
      EXPECT_NE(collective_name(k), "?") << i;
    }
  }
  // Every algorithm of every collective runs through the switch that
  // chooses the algorithm's code (all_reduce's used to fall to recursive
  // doubling for any value it did not know).
  for (const OpSpec& s : op_table())
    for (Algorithm a : algorithms_for(s.collective)) EXPECT_TRUE(algorithm_supports(a, s.collective));
}

// One rule for new groups, one error text, wherever a group is made.
TEST(NewGroup, OneRuleAndOneErrorText) {
  EXPECT_EQ(new_group_members({3, 1, 2}, 4, 0), (std::vector<int>{1, 2, 3}));
  auto text = [](std::vector<int> ranks) {
    try {
      new_group_members(std::move(ranks), 4, 1);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(text({}), "invalid_argument: rank 1, new_group on world: a group needs at least one rank");
  EXPECT_EQ(text({0, 4}), "invalid_argument: rank 1, new_group on world: rank 4 is out of range for world size 4");
  EXPECT_EQ(text({2, 0, 2}), "invalid_argument: rank 1, new_group on world: rank 2 is listed twice");
  EXPECT_EQ(default_group_name(2, {0, 3}), "group 2 {0,3}");
  // collie's core refuses exactly so.
  sim::SimWorld w(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    (void)c.new_group({});
    co_return;
  });
  EXPECT_EQ(error_text(res, 1), "invalid_argument: rank 1, new_group on world: a group needs at least one rank");
}

TEST(BatchIsendIrecv, ARingShiftInOneBatchCompletesTogether) {
  sim::SimWorld w(5);
  std::vector<double> got(5, -1);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const int n = c.world_size();
    Tensor out(DType::kFloat64, {3}), in(DType::kFloat64, {3});
    for (std::size_t i = 0; i < 3; ++i) out.set(i, c.rank() * 10 + static_cast<double>(i));
    const std::vector<P2POp> ops = {P2POp{false, in, (c.rank() + n - 1) % n, 0}, P2POp{true, out, (c.rank() + 1) % n, 0}};
    Work batch = c.batch_isend_irecv(ops);
    co_await batch;
    got[static_cast<std::size_t>(c.rank())] = in.get(2);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  for (int r = 0; r < 5; ++r) EXPECT_EQ(got[static_cast<std::size_t>(r)], ((r + 4) % 5) * 10 + 2);
}

TEST(BatchIsendIrecv, AFailedOpFailsTheBatchWithItsError) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor small(DType::kFloat32, {2}), big(DType::kFloat32, {8});
    if (c.rank() == 0) {
      const std::vector<P2POp> ops = {P2POp{true, big, 1, 0}};
      co_await c.batch_isend_irecv(ops);
    } else {
      const std::vector<P2POp> ops = {P2POp{false, small, 0, 0}};
      co_await c.batch_isend_irecv(ops);
    }
  });
  EXPECT_EQ(error_kind(res, 1), ErrorKind::kSizeMismatch) << error_text(res, 1);
}

TEST(MonitoredBarrier, NamesTheFirstMissingRankOrEveryOne) {
  for (bool all : {false, true}) {
    sim::SimWorld w(5);
    auto res = w.run([&](Communicator& c) -> Task<void> {
      if (c.rank() == 1 || c.rank() == 3) co_return;
      co_await c.monitored_barrier({}, 300'000'000, all);
    });
    EXPECT_EQ(error_kind(res, 0), ErrorKind::kTimeout);
    EXPECT_NE(error_text(res, 0).find(all ? "ranks 1, 3 did not arrive within 300 ms" : "rank 1 did not arrive within 300 ms"),
              std::string::npos)
        << error_text(res, 0);
    EXPECT_EQ(error_kind(res, 2), ErrorKind::kTimeout) << error_text(res, 2);
  }
}

TEST(MonitoredBarrier, NoMemberLeavesBeforeTheLastArrived) {
  sim::SimWorld w(4);
  std::vector<Nanos> left(4);
  Nanos last_arrival = 0;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const Group alone = c.new_group(std::vector<int>{3});
    if (c.rank() == 3) {  // arrives late
      Tensor t(DType::kFloat32, std::vector<std::int64_t>{1 << 18});
      co_await c.all_reduce(t, ReduceOp::kSum, alone);
      last_arrival = c.executor().now();
    }
    co_await c.monitored_barrier({}, 0, false);
    left[static_cast<std::size_t>(c.rank())] = c.executor().now();
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  for (Nanos t : left) EXPECT_GE(t, last_arrival);
}

}  // namespace
}  // namespace collie
