// Property tests: for random worlds, groups, dtypes, reduce ops, counts,
// roots, algorithms and seeds, every collective's result equals the oracle
// on every rank; point-to-point ordering, tags and any-source; determinism.
//
// Every failure prints the case and the simulator seed; rapidcheck prints
// the string that replays the failing case (RC_PARAMS="reproduce=...").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "conformance/collective_check.h"
#include "check/reference.h"
#include "core/communicator.h"
#include "sim/faults.h"
#include "sim/sim_world.h"

namespace collie::conformance {
namespace {

const std::vector<CollectiveKind> kCollectives = {
    CollectiveKind::kBroadcast, CollectiveKind::kReduce,        CollectiveKind::kAllReduce,
    CollectiveKind::kScatter,   CollectiveKind::kGather,        CollectiveKind::kAllGather,
    CollectiveKind::kBarrier,   CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};

rc::Gen<std::size_t> gen_count() {
  return rc::gen::weightedOneOf<std::size_t>({
      {2, rc::gen::just<std::size_t>(0)},
      {2, rc::gen::just<std::size_t>(1)},
      {4, rc::gen::element<std::size_t>(2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 257, 1021)},
      {4, rc::gen::inRange<std::size_t>(0, 300)},
      {1, rc::gen::inRange<std::size_t>(1000, 40000)},
  });
}

// A random non-empty subset of 0..world-1 (the whole world half the time).
std::vector<int> gen_group(int world) {
  if (*rc::gen::arbitrary<bool>()) return {};
  std::vector<int> g;
  for (int r = 0; r < world; ++r)
    if (*rc::gen::arbitrary<bool>()) g.push_back(r);
  if (g.empty()) g.push_back(*rc::gen::inRange(0, world));
  // Any order: new_group sorts.
  if (*rc::gen::arbitrary<bool>()) std::reverse(g.begin(), g.end());
  return g;
}

CollectiveCase gen_case(int world, std::size_t count) {
  CollectiveCase c;
  c.op = *rc::gen::elementOf(kCollectives);
  c.group = gen_group(world);
  c.dtype = static_cast<DType>(*rc::gen::inRange(0, kNumDTypes));
  std::vector<ReduceOp> ops;
  for (int i = 0; i < kNumReduceOps; ++i)
    if (!reduce_op_unsupported(static_cast<ReduceOp>(i), c.dtype)) ops.push_back(static_cast<ReduceOp>(i));
  c.reduce_op = *rc::gen::elementOf(ops);
  c.count = count;
  std::vector<int> members = c.group;
  if (members.empty())
    for (int r = 0; r < world; ++r) members.push_back(r);
  c.root = *rc::gen::elementOf(members);
  std::vector<Algorithm> algs = algorithms_for(c.op);
  algs.push_back(Algorithm::kAuto);
  c.algorithm = *rc::gen::elementOf(algs);
  c.data_seed = *rc::gen::arbitrary<std::uint64_t>();
  c.tensor_form = *rc::gen::arbitrary<bool>();
  c.uneven = c.op == CollectiveKind::kAllToAll && c.algorithm != Algorithm::kBruck && *rc::gen::arbitrary<bool>();
  return c;
}

sim::SimOptions gen_sim_options() {
  sim::SimOptions o;
  o.seed = *rc::gen::arbitrary<std::uint64_t>();
  o.network.ranks_per_node = *rc::gen::element(0, 1, 2, 4);
  o.network.eager_threshold_bytes = *rc::gen::element<std::size_t>(0, 64, 4096, 64 * 1024);
  o.network.jitter_fraction = *rc::gen::element(0.0, 0.5, 3.0);
  return o;
}

RC_GTEST_PROP(CollectiveProperty, EveryCollectiveMatchesTheOracle, ()) {
  // Full size from the first case: worlds 1..17 uniformly, not scaled down.
  const int world = *rc::gen::resize(100, rc::gen::inRange(1, 18));
  const auto opts = gen_sim_options();
  const CollectiveCase c = gen_case(world, *gen_count());
  RC_TAG(collective_name(c.op));
  RC_CLASSIFY(world >= 9, "world >= 9");
  RC_CLASSIFY(c.count >= 100, "count >= 100");
  sim::SimWorld w(world, opts);
  const std::string err = run_and_check(w, {c});
  if (!err.empty()) RC_FAIL(err + "\n  world " + std::to_string(world) + ", sim seed " + std::to_string(opts.seed));
}

// Signed zeros, NaNs of both signs, infinities and subnormals: collie's core
// gives the oracle's bits on every rank whatever the algorithm (its
// canonical NaN; -0.0 below +0.0 for MIN and MAX), and moves them unchanged.
RC_GTEST_PROP(CollectiveProperty, SpecialFloatingValuesGiveTheOraclesBits, ()) {
  const int world = *rc::gen::resize(100, rc::gen::inRange(1, 18));
  const auto opts = gen_sim_options();
  CollectiveCase c = gen_case(world, *gen_count());
  c.dtype = *rc::gen::element(DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64);
  c.reduce_op = *rc::gen::element(ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg);
  c.special_values = true;
  RC_TAG(collective_name(c.op));
  sim::SimWorld w(world, opts);
  const std::string err = run_and_check(w, {c});
  if (!err.empty()) RC_FAIL(err + "\n  world " + std::to_string(world) + ", sim seed " + std::to_string(opts.seed));
}

// Regression: recursive doubling gave different bits on different ranks for
// -0.0/+0.0 ties and NaNs of both signs, and ring and halving-doubling gave
// different zeros for the same inputs. Every reducing algorithm, every
// floating dtype and op, worlds with and without a power of two.
TEST(SpecialValues, EveryReducingAlgorithmAndFloatingDtypeGivesTheOraclesBits) {
  int runs = 0;
  for (int world : {2, 3, 4, 5, 7, 8}) {
    for (CollectiveKind op : {CollectiveKind::kReduce, CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter}) {
      for (Algorithm a : algorithms_for(op)) {
        for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
          for (ReduceOp rop : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
            CollectiveCase c;
            c.op = op;
            c.dtype = dt;
            c.reduce_op = rop;
            c.algorithm = a;
            c.count = 97;
            c.root = world / 2;
            c.data_seed = static_cast<std::uint64_t>(world * 1000 + runs);
            c.special_values = true;
            sim::SimWorld w(world);
            EXPECT_EQ(run_and_check(w, {c}), "") << c.describe() << " world " << world;
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 400);
}

// Several collectives in flight at once on overlapping groups: contexts keep
// their traffic apart, sequence numbers keep same-group calls apart.
RC_GTEST_PROP(CollectiveProperty, ConcurrentCollectivesOnOverlappingGroups, ()) {
  const int world = *rc::gen::inRange(2, 12);
  const auto opts = gen_sim_options();
  const int k = *rc::gen::inRange(2, 5);
  std::vector<CollectiveCase> cases;
  for (int i = 0; i < k; ++i) cases.push_back(gen_case(world, *rc::gen::inRange<std::size_t>(0, 200)));
  sim::SimWorld w(world, opts);
  const std::string err = run_and_check(w, cases);
  if (!err.empty()) RC_FAIL(err + "\n  world " + std::to_string(world) + ", sim seed " + std::to_string(opts.seed));
}

// A few MiB per rank, every algorithm.
TEST(CollectiveLarge, MebibytesPerRankMatchTheOracle) {
  const std::vector<std::pair<int, std::size_t>> shapes = {{2, 786433}, {5, 1 << 20}, {8, 393241}};
  for (auto [world, count] : shapes) {
    for (CollectiveKind op : {CollectiveKind::kAllReduce, CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
      for (Algorithm a : algorithms_for(op)) {
        CollectiveCase c;
        c.op = op;
        c.dtype = DType::kFloat32;
        c.count = count;
        c.root = world - 1;
        c.algorithm = a;
        c.data_seed = count;
        sim::SimWorld w(world);
        EXPECT_EQ(run_and_check(w, {c}), "") << c.describe();
      }
    }
    // The block-wise collectives: a few MiB in all per rank.
    for (CollectiveKind op : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
      for (Algorithm a : algorithms_for(op)) {
        CollectiveCase g;
        g.op = op;
        g.dtype = DType::kInt64;
        g.count = count / static_cast<std::size_t>(world);
        g.algorithm = a;
        g.tensor_form = world % 2 == 1;
        g.data_seed = count + 1;
        sim::SimWorld w(world);
        EXPECT_EQ(run_and_check(w, {g}), "") << g.describe();
      }
    }
  }
}

// ---- the ops added through the table ---------------------------------------

RunOnEveryRank on_sim(sim::SimWorld& w) {
  return [&w](const DistProgram& program) { return w.run([&program](Communicator& c) { return program(c); }); };
}

// Every rank's traffic in one batch_isend_irecv on a shuffled group of
// every rank: every message arrives, in order per (src, dst, tag).
RC_GTEST_PROP(BatchIsendIrecvProperty, EveryMessageOfEveryBatchArrivesInOrder, ()) {
  const int world = *rc::gen::inRange(2, 9);
  sim::SimWorld w(world, gen_sim_options());
  sim::Prng prng(*rc::gen::arbitrary<std::uint64_t>());
  const CaseOutcome o = run_batch_traffic(on_sim(w), world, prng, *rc::gen::inRange(1, 12));
  RC_ASSERT(o.failure.empty());
  RC_ASSERT(o.skipped.empty());
}

// A monitored_barrier with random members away names exactly the first
// missing one (or every one), on any group.
RC_GTEST_PROP(MonitoredBarrierProperty, TheFirstMemberNamesTheMissingRanks, ()) {
  const int world = *rc::gen::inRange(1, 9);
  sim::SimWorld w(world, gen_sim_options());
  sim::Prng prng(*rc::gen::arbitrary<std::uint64_t>());
  const CaseOutcome o = run_monitored_barrier(on_sim(w), world, prng, 300'000'000, true);
  RC_ASSERT(o.failure.empty());
}

// ---- determinism ----------------------------------------------------------

struct Outcome {
  std::uint64_t hash;
  Nanos end;
  std::vector<std::vector<std::byte>> data;
};

Outcome run_mixed_program(int world, std::uint64_t seed) {
  sim::SimOptions o;
  o.seed = seed;
  o.network.jitter_fraction = 2.0;
  sim::SimWorld w(world, o);
  std::vector<Tensor> a, b;
  for (int r = 0; r < world; ++r) {
    a.emplace_back(DType::kFloat64, std::vector<std::int64_t>{1000});
    b.emplace_back(DType::kInt32, std::vector<std::int64_t>{40000});
    for (std::size_t i = 0; i < 1000; ++i) a.back().set(i, 0.1 * static_cast<double>(r + 1) * static_cast<double>(i));
    for (std::size_t i = 0; i < 40000; ++i) b.back().set_int(i, r * 7 + static_cast<std::int64_t>(i));
  }
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const auto r = static_cast<std::size_t>(c.rank());
    // Inexact float sums: the order of combination shows in the bits.
    co_await c.all_reduce(a[r], ReduceOp::kSum);
    co_await c.reduce(b[r], 0, ReduceOp::kSum);
    const int right = (c.rank() + 1) % c.world_size(), left = (c.rank() + c.world_size() - 1) % c.world_size();
    Tensor tmp(DType::kInt32, {40000});
    Work s = c.isend(b[r], right, 3);
    Work rv = c.irecv(tmp, left, 3);
    co_await s;
    co_await rv;
    co_await c.broadcast(a[r], world - 1);
    co_await c.barrier();
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  Outcome out{res.trace_hash, res.end_time, {}};
  for (int r = 0; r < world; ++r) {
    auto sa = a[static_cast<std::size_t>(r)].byte_span();
    auto sb = b[static_cast<std::size_t>(r)].byte_span();
    out.data.emplace_back(sa.begin(), sa.end());
    out.data.emplace_back(sb.begin(), sb.end());
  }
  return out;
}

TEST(Determinism, SameSeedGivesTheSameTraceHashAndTime) {
  for (std::uint64_t seed : {1ull, 42ull, 0xdeadbeefull}) {
    const Outcome x = run_mixed_program(7, seed);
    const Outcome y = run_mixed_program(7, seed);
    EXPECT_EQ(x.hash, y.hash) << "seed " << seed;
    EXPECT_EQ(x.end, y.end) << "seed " << seed;
    EXPECT_EQ(x.data, y.data) << "seed " << seed;
  }
}

TEST(Determinism, DifferentSeedsGiveTheSameResultsWithoutAnySource) {
  const Outcome base = run_mixed_program(6, 1);
  std::set<std::uint64_t> hashes{base.hash};
  for (std::uint64_t seed = 2; seed < 12; ++seed) {
    const Outcome o = run_mixed_program(6, seed);
    EXPECT_EQ(o.data, base.data) << "seed " << seed;
    hashes.insert(o.hash);
  }
  // The seed really does change the schedule (jitter and tie-breaks).
  EXPECT_GT(hashes.size(), 1u);
}

// ---- point-to-point -------------------------------------------------------

// Random traffic: every rank sends a random sequence of messages to random
// peers on random tags; receivers post receives per (src, tag) in order. Each
// message carries (src, tag, index) so order violations are visible.
RC_GTEST_PROP(PointToPointProperty, MessagesOnOneChannelAndTagNeverOvertake, ()) {
  const int world = *rc::gen::inRange(2, 7);
  const auto opts = gen_sim_options();
  const int per_rank = *rc::gen::inRange(1, 25);
  struct Msg {
    int dst, tag;
    std::size_t count;
  };
  std::vector<std::vector<Msg>> plan(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < per_rank; ++i) {
      int dst = *rc::gen::inRange(0, world - 1);
      if (dst >= r) ++dst;
      plan[static_cast<std::size_t>(r)].push_back(
          Msg{dst, *rc::gen::inRange(0, 3), *rc::gen::element<std::size_t>(1, 3, 20000)});
    }
  const bool recv_any_tag_order = *rc::gen::arbitrary<bool>();
  sim::SimWorld w(world, opts);
  std::string failure;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const int me = c.rank();
    std::vector<Tensor> out, in;
    std::vector<Work> works;
    for (std::size_t i = 0; i < plan[static_cast<std::size_t>(me)].size(); ++i) {
      const Msg& m = plan[static_cast<std::size_t>(me)][i];
      out.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(m.count)});
      out.back().set_int(0, me * 1000000 + m.tag * 1000 + static_cast<std::int64_t>(i));
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      const Msg& m = plan[static_cast<std::size_t>(me)][i];
      works.push_back(c.isend(out[i], m.dst, m.tag));
    }
    // Expected arrivals at `me`, per (src, tag), in send order.
    std::vector<std::tuple<int, int, std::int64_t, std::size_t>> expect;
    for (int s = 0; s < world; ++s)
      for (std::size_t i = 0; i < plan[static_cast<std::size_t>(s)].size(); ++i) {
        const Msg& m = plan[static_cast<std::size_t>(s)][i];
        if (m.dst == me) expect.emplace_back(s, m.tag, s * 1000000 + m.tag * 1000 + static_cast<std::int64_t>(i), m.count);
      }
    if (recv_any_tag_order) std::stable_sort(expect.begin(), expect.end(), [](auto& x, auto& y) {
        return std::get<1>(x) > std::get<1>(y);
      });
    in.reserve(expect.size());
    std::vector<Work> recvs;
    for (auto& [s, tag, val, count] : expect) {
      in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(count)});
      recvs.push_back(c.irecv(in.back(), s, tag));
    }
    co_await wait_all(recvs);
    for (std::size_t i = 0; i < expect.size(); ++i)
      if (in[i].get_int(0) != std::get<2>(expect[i]) && failure.empty())
        failure = "rank " + std::to_string(me) + " got " + std::to_string(in[i].get_int(0)) + " expected " +
                  std::to_string(std::get<2>(expect[i]));
    co_await wait_all(works);
  });
  RC_ASSERT(res.ok());
  if (!failure.empty()) RC_FAIL(failure);
}

// Any-source receives get every message exactly once, report the true sender,
// and see each sender's messages in its send order.
RC_GTEST_PROP(PointToPointProperty, AnySourceReceivesEverythingOnceInPerSenderOrder, ()) {
  const int world = *rc::gen::inRange(2, 9);
  const auto opts = gen_sim_options();
  const int each = *rc::gen::inRange(1, 6);
  sim::SimWorld w(world, opts);
  std::map<int, std::vector<std::int64_t>> got;  // sender -> values in receive order
  std::vector<int> sources;
  bool source_ok = true;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    if (c.rank() != 0) {
      for (int i = 0; i < each; ++i) {
        Tensor t(DType::kInt64, {1});
        t.set_int(0, c.rank() * 100 + i);
        co_await c.send(t, 0, 5);
      }
      co_return;
    }
    for (int i = 0; i < each * (world - 1); ++i) {
      Tensor t(DType::kInt64, {1});
      Work rv = c.recv(t, kAnySource, 5);
      co_await rv;
      const int src = rv.source_rank();
      if (t.get_int(0) / 100 != src) source_ok = false;
      got[src].push_back(t.get_int(0));
    }
  });
  RC_ASSERT(res.ok());
  RC_ASSERT(source_ok);
  RC_ASSERT(static_cast<int>(got.size()) == world - 1);
  for (auto& [src, vals] : got) {
    RC_ASSERT(static_cast<int>(vals.size()) == each);
    for (int i = 0; i < each; ++i) RC_ASSERT(vals[static_cast<std::size_t>(i)] == src * 100 + i);
  }
}

// ---- the core masks what a real transport masks -----------------------------

TEST(FaultConformance, CollectivesEqualTheOracleUnderDelayAndReorderFor1000Seeds) {
  sim::FaultPlan benign;  // delays and reordering: a correct network may do both
  for (const char* f : {"reorder:p=0.5,max_us=20", "delay:p=0.3,mean_us=5"}) ASSERT_FALSE(sim::parse_fault(f, benign));
  int failures = 0, faulted = 0;
  for (std::uint64_t seed = 1; seed <= 1000; ++seed) {
    sim::Prng prng(seed);
    const int world = 1 + static_cast<int>(prng.below(8));
    static const CollectiveKind kinds[] = {CollectiveKind::kBroadcast, CollectiveKind::kReduce,
                                           CollectiveKind::kAllReduce, CollectiveKind::kScatter,
                                           CollectiveKind::kGather,    CollectiveKind::kAllGather};
    const auto c = random_case(kinds[prng.below(6)], world, prng);
    sim::SimOptions o;
    o.seed = seed;
    o.network.eager_threshold_bytes = prng.below(2) ? 64 : 65536;
    o.faults = benign;
    sim::SimWorld w(world, o);
    const std::string err = run_and_check(w, {c});
    if (!err.empty() && ++failures <= 3) ADD_FAILURE() << "seed " << seed << ": " << err;
    faulted += w.simulator().fault_log().empty() ? 0 : 1;
  }
  EXPECT_EQ(failures, 0);
  // The faults really fired (runs without messages -- a group of one -- have none to hit).
  EXPECT_GT(faulted, 700);
}

}  // namespace
}  // namespace collie::conformance
