// Collectives and groups: the seeds' examples, and every validation and
// cross-rank mismatch error, with the messages users see.
#include <gtest/gtest.h>

#include "check/reference.h"
#include "core/communicator.h"
#include "core/op.h"
#include "sim/sim_world.h"
#include "sim/testing.h"

namespace collie {
namespace {

using sim::testing::error_kind;
using sim::testing::error_text;

// Seed 001, on 4 ranks: all_reduce / reduce of ones over a group of all ranks.
TEST(Collectives, SeedReduceAndAllReduceOfOnes) {
  sim::SimWorld w(4);
  std::vector<double> reduced(4), all(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({0, 1, 2, 3});
    Tensor t(DType::kFloat32, {1});
    t.set(0, 1);
    co_await c.reduce(t, 0, ReduceOp::kSum, g);
    reduced[static_cast<std::size_t>(c.rank())] = t.get(0);
    Tensor u(DType::kFloat32, {1});
    u.set(0, 1);
    co_await c.all_reduce(u, ReduceOp::kSum, g);
    all[static_cast<std::size_t>(c.rank())] = u.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  // Gloo prints 3.0, 2.0, 1.0 on ranks 1..3 (partial sums); collie leaves them unchanged.
  EXPECT_EQ(reduced, (std::vector<double>{4, 1, 1, 1}));
  EXPECT_EQ(all, (std::vector<double>{4, 4, 4, 4}));
}

// Seed 001: scatter [1,2,3,4] from 0; gather and all_gather of the rank.
TEST(Collectives, SeedScatterGatherAllGather) {
  sim::SimWorld w(4);
  std::vector<double> scattered(4);
  std::vector<std::vector<double>> gathered(4), all_gathered(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const int n = c.world_size();
    Tensor t(DType::kFloat32, {1});
    std::vector<Tensor> list;
    std::vector<TensorView> views;
    if (c.rank() == 0) {
      for (int i = 0; i < n; ++i) {
        list.emplace_back(DType::kFloat32, std::vector<std::int64_t>{1});
        list.back().set(0, i + 1);
      }
      for (auto& x : list) views.push_back(x);
    }
    co_await c.scatter(t, 0, views);
    scattered[static_cast<std::size_t>(c.rank())] = t.get(0);

    Tensor mine(DType::kFloat32, {1});
    mine.set(0, c.rank());
    std::vector<Tensor> glist;
    std::vector<TensorView> gviews;
    if (c.rank() == 0) {
      for (int i = 0; i < n; ++i) glist.emplace_back(DType::kFloat32, std::vector<std::int64_t>{1});
      for (auto& x : glist) gviews.push_back(x);
    }
    co_await c.gather(mine, 0, gviews);
    for (auto& x : glist) gathered[static_cast<std::size_t>(c.rank())].push_back(x.get(0));

    std::vector<Tensor> alist;
    std::vector<TensorView> aviews;
    for (int i = 0; i < n; ++i) alist.emplace_back(DType::kFloat32, std::vector<std::int64_t>{1});
    for (auto& x : alist) aviews.push_back(x);
    co_await c.all_gather(aviews, mine);
    for (auto& x : alist) all_gathered[static_cast<std::size_t>(c.rank())].push_back(x.get(0));
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(scattered, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(gathered[0], (std::vector<double>{0, 1, 2, 3}));
  EXPECT_TRUE(gathered[1].empty());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(all_gathered[static_cast<std::size_t>(r)], (std::vector<double>{0, 1, 2, 3}));
}

// Seed 004: int64 tensors arange(2) + 1 + 2*rank, reduce to rank 3.
TEST(Collectives, SeedInt64ReduceToRankThree) {
  sim::SimWorld w(4);
  std::vector<std::vector<std::int64_t>> out(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kInt64, {2});
    for (int i = 0; i < 2; ++i) t.set_int(static_cast<std::size_t>(i), i + 1 + 2 * c.rank());
    co_await c.reduce(t, 3, ReduceOp::kSum);
    out[static_cast<std::size_t>(c.rank())] = {t.get_int(0), t.get_int(1)};
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(out[3], (std::vector<std::int64_t>{16, 20}));
  EXPECT_EQ(out[0], (std::vector<std::int64_t>{1, 2}));
}

// Seed 000: all_reduce over group [0, 1] in a world of 2.
TEST(Collectives, SeedAllReduceOverAGroup) {
  sim::SimWorld w(2);
  std::vector<double> out(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({0, 1});
    Tensor t(DType::kFloat32, {1});
    t.set(0, 1);
    co_await c.all_reduce(t, ReduceOp::kSum, g);
    out[static_cast<std::size_t>(c.rank())] = t.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(out, (std::vector<double>{2, 2}));
}

TEST(Groups, NonMembersCompleteAtOnceAndAreUntouched) {
  sim::SimWorld w(4);
  std::vector<int> rank_in(4);
  std::vector<bool> not_member(4);
  std::vector<double> values(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({3, 1});
    rank_in[static_cast<std::size_t>(c.rank())] = c.rank_in(g);
    Tensor t(DType::kFloat32, {1});
    t.set(0, 5);
    Work wk = c.all_reduce(t, ReduceOp::kSum, g);
    not_member[static_cast<std::size_t>(c.rank())] = wk.not_member();
    if (wk.not_member()) {
      EXPECT_TRUE(wk.is_completed());
    }
    co_await wk;
    values[static_cast<std::size_t>(c.rank())] = t.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(rank_in, (std::vector<int>{-1, 0, -1, 1}));
  EXPECT_EQ(not_member, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(values, (std::vector<double>{5, 10, 5, 10}));
}

TEST(Groups, TranslationBothWaysAndErrors) {
  sim::SimWorld w(5);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group g = c.new_group({4, 2, 0});
    EXPECT_EQ(c.group_rank(g, 2), 1);
    EXPECT_EQ(c.global_rank(g, 2), 4);
    EXPECT_EQ(g.size(), 3);
    try {
      (void)c.group_rank(g, 3);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("global rank 3 is not in group 1 {0,2,4}"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)c.global_rank(g, 3), Error);
    EXPECT_THROW((void)c.new_group({0, 0}), Error);
    EXPECT_THROW((void)c.new_group({7}), Error);
    EXPECT_THROW((void)c.new_group({}), Error);
    co_return;
  });
  EXPECT_TRUE(res.ok()) << res.describe();
}

TEST(Groups, MessagesOfDifferentGroupsNeverMatch) {
  // Rank 0 sends on group A then on the world; rank 1 receives on the world
  // first. Without per-group contexts it would get group A's message.
  sim::SimWorld w(2);
  double world_value = 0, group_value = 0;
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group a = c.new_group({0, 1});
    Tensor x(DType::kFloat32, {1});
    Tensor y(DType::kFloat32, {1});
    if (c.rank() == 0) {
      x.set(0, 1);
      y.set(0, 2);
      co_await c.send(x, 1, 0, a);
      co_await c.send(y, 1, 0);
    } else {
      co_await c.recv(y, 0, 0);
      co_await c.recv(x, 0, 0, a);
      world_value = y.get(0);
      group_value = x.get(0);
    }
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(world_value, 2.0);
  EXPECT_EQ(group_value, 1.0);
}

// A destroyed group refuses every later op, through dispatch() and the core's
// own calls; a group of the same ranks made after it is a new group whose
// messages never meet a frame sent on the old one.
TEST(Groups, DestroyedGroupIsRefusedAndItsSuccessorIsANewGroup) {
  sim::SimWorld w(3);
  std::vector<std::string> refusals;
  std::vector<double> got(3, -1);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group old_pair = c.new_group({2, 0});
    Tensor t(DType::kFloat32, {1});
    // Rank 2 sends on the old group and the receiver never takes it.
    if (c.rank() == 2) co_await c.isend(t, 0, 5, old_pair);
    c.destroy_group(old_pair);
    for (auto call : {+[](Communicator& d, const Group& g, Tensor& x) { return d.all_reduce(x, ReduceOp::kSum, g); },
                      +[](Communicator& d, const Group& g, Tensor& x) {
                        DistCall call;
                        call.kind = OpKind::kBroadcast;
                        call.group = g;
                        call.peer = 0;
                        call.tensor = x;
                        return dispatch(d, call);
                      }}) {
      try {
        (void)call(c, old_pair, t);
        refusals.push_back("none");
      } catch (const Error& e) {
        refusals.push_back(std::string(error_kind_name(e.kind())) + ": " + e.what());
      }
    }
    try {
      c.destroy_group(old_pair);
      refusals.push_back("none");
    } catch (const Error& e) {
      refusals.push_back(e.what());
    }
    try {
      c.destroy_group(c.world());
      refusals.push_back("none");
    } catch (const Error& e) {
      refusals.push_back(e.what());
    }
    Group pair = c.new_group({0, 2});
    Tensor x(DType::kFloat32, {1});
    x.set(0, 10 + c.rank());
    if (c.rank() != 1) {
      if (c.rank() == 2) co_await c.send(x, 0, 5, pair);
      if (c.rank() == 0) co_await c.recv(x, 2, 5, pair);
    }
    got[static_cast<std::size_t>(c.rank())] = x.get(0);
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(got[0], 12.0);
  ASSERT_EQ(refusals.size(), 12u);
  for (int r = 0; r < 3; ++r) {
    const auto at = static_cast<std::size_t>(4 * r);
    EXPECT_NE(refusals[at].find("invalid_argument"), std::string::npos) << refusals[at];
    EXPECT_NE(refusals[at].find("was destroyed"), std::string::npos) << refusals[at];
    EXPECT_NE(refusals[at + 1].find("broadcast"), std::string::npos) << refusals[at + 1];
    EXPECT_NE(refusals[at + 1].find("was destroyed (destroy_group)"), std::string::npos) << refusals[at + 1];
    EXPECT_NE(refusals[at + 2].find("destroyed already"), std::string::npos) << refusals[at + 2];
    EXPECT_NE(refusals[at + 3].find("the world cannot be destroyed"), std::string::npos) << refusals[at + 3];
  }
}

TEST(Groups, GroupsCreatedInDifferentOrdersAreAGroupMismatch) {
  sim::SimWorld w(3);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Group a, b;
    if (c.rank() == 0) {
      a = c.new_group({0, 1});
      b = c.new_group({0, 1, 2});
    } else {
      b = c.new_group({0, 1, 2});
      a = c.new_group({0, 1});
    }
    Tensor t(DType::kFloat32, {1});
    if (c.rank() <= 1) co_await c.all_reduce(t, ReduceOp::kSum, a);
  });
  EXPECT_FALSE(res.ok());
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    const std::string e = error_text(res, r);
    if (e.find("group_mismatch") != std::string::npos && e.find("different order") != std::string::npos) named = true;
  }
  EXPECT_TRUE(named) << error_text(res, 0) << "\n" << error_text(res, 1) << "\n" << res.deadlock_report;
}

// ---- validation errors raised by the call itself --------------------------

std::string call_error(int world, const std::function<Work(Communicator&)>& call, int on_rank = 0) {
  sim::SimWorld w(world);
  std::string out = "no error";
  auto res = w.run([&](Communicator& c) -> Task<void> {
    if (c.rank() != on_rank) co_return;
    try {
      Work wk = call(c);
      co_await wk;
    } catch (const Error& e) {
      out = std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
  });
  return out;
}

TEST(CollectiveValidation, ListLengthMustEqualGroupSize) {
  Tensor t(DType::kFloat32, {1});
  std::vector<Tensor> three(3, Tensor(DType::kFloat32, {1}));
  std::vector<TensorView> v(three.begin(), three.end());
  auto e = call_error(4, [&](Communicator& c) { return c.scatter(t, 0, v); });
  EXPECT_NE(e.find("scatter_list has 3 tensors but world has 4 ranks"), std::string::npos) << e;
  e = call_error(4, [&](Communicator& c) { return c.gather(t, 0, v); });
  EXPECT_NE(e.find("gather_list has 3 tensors but world has 4 ranks"), std::string::npos) << e;
  e = call_error(4, [&](Communicator& c) { return c.all_gather(v, t); });
  EXPECT_NE(e.find("tensor_list has 3 tensors but world has 4 ranks"), std::string::npos) << e;
}

TEST(CollectiveValidation, ListOnANonRootIsAnError) {
  Tensor t(DType::kFloat32, {1});
  std::vector<Tensor> four(4, Tensor(DType::kFloat32, {1}));
  std::vector<TensorView> v(four.begin(), four.end());
  auto e = call_error(4, [&](Communicator& c) { return c.scatter(t, 0, v); }, 2);
  EXPECT_NE(e.find("scatter_list must be empty on non-source ranks (the source is rank 0)"), std::string::npos) << e;
  e = call_error(4, [&](Communicator& c) { return c.gather(t, 3, v); }, 1);
  EXPECT_NE(e.find("gather_list must be empty on non-destination ranks"), std::string::npos) << e;
}

TEST(CollectiveValidation, ListEntriesMustMatchTheTensor) {
  Tensor t(DType::kFloat32, {1});
  std::vector<Tensor> l;
  for (int i = 0; i < 2; ++i) l.emplace_back(DType::kFloat32, std::vector<std::int64_t>{1});
  l.emplace_back(DType::kInt64, std::vector<std::int64_t>{1});
  std::vector<TensorView> v(l.begin(), l.end());
  auto e = call_error(3, [&](Communicator& c) { return c.all_gather(v, t); });
  EXPECT_NE(e.find("tensor_list[2] is int64 x 1 but the input tensor is float32 x 1"), std::string::npos) << e;
}

TEST(CollectiveValidation, RootOutOfRangeOrOutsideTheGroup) {
  Tensor t(DType::kFloat32, {1});
  auto e = call_error(4, [&](Communicator& c) { return c.broadcast(t, 4); });
  EXPECT_NE(e.find("invalid_argument"), std::string::npos);
  EXPECT_NE(e.find("root 4 is out of range for world size 4"), std::string::npos) << e;
  e = call_error(4, [&](Communicator& c) {
    Group g = c.new_group({0, 1});
    return c.reduce(t, 3, ReduceOp::kSum, g);
  });
  EXPECT_NE(e.find("root 3 is not a member of group 1 {0,1}"), std::string::npos) << e;
}

TEST(CollectiveValidation, UnsupportedReduceOpForTheDType) {
  Tensor f(DType::kFloat32, {1});
  Tensor i(DType::kInt32, {1});
  auto e = call_error(2, [&](Communicator& c) { return c.all_reduce(f, ReduceOp::kBxor); });
  EXPECT_NE(e.find("BXOR is not defined for float32"), std::string::npos) << e;
  e = call_error(2, [&](Communicator& c) { return c.reduce(i, 0, ReduceOp::kAvg); });
  EXPECT_NE(e.find("AVG is not defined for int32"), std::string::npos) << e;
}

TEST(CollectiveValidation, AlgorithmThatDoesNotImplementTheCollective) {
  Tensor f(DType::kFloat32, {1});
  auto e = call_error(2, [&](Communicator& c) { return c.broadcast(f, 0, {}, {Algorithm::kRing}); });
  EXPECT_NE(e.find("algorithm 'ring' does not implement broadcast"), std::string::npos) << e;
}

// ---- disagreements between ranks ------------------------------------------

TEST(CollectiveMismatch, DifferentCountsNameBothRanksAndBothCalls) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {c.rank() == 0 ? 4 : 8});
    co_await c.all_reduce(t);
  });
  EXPECT_FALSE(res.ok());
  const std::string e = error_text(res, 0).empty() ? error_text(res, 1) : error_text(res, 0);
  EXPECT_NE(e.find("collective_mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce(float32 x 8"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce(float32 x 4"), std::string::npos) << e;
  EXPECT_NE(e.find("#1 on world"), std::string::npos) << e;
}

TEST(CollectiveMismatch, DifferentDTypes) {
  sim::SimWorld w(3);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(c.rank() == 2 ? DType::kFloat64 : DType::kFloat32, {4});
    co_await c.broadcast(t, 0);
  });
  const std::string e = error_text(res, 2);
  EXPECT_EQ(error_kind(res, 2), ErrorKind::kCollectiveMismatch) << e;
  EXPECT_NE(e.find("rank 0 called broadcast(float32 x 4, root 0"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 2 called broadcast(float64 x 4, root 0"), std::string::npos) << e;
}

TEST(CollectiveMismatch, DifferentCollectivesAtTheSameSequenceNumber) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1});
    if (c.rank() == 0) {
      co_await c.all_reduce(t);
    } else {
      co_await c.broadcast(t, 1);
    }
  });
  const std::string e = error_text(res, 0);
  EXPECT_EQ(error_kind(res, 0), ErrorKind::kCollectiveMismatch) << e;
  EXPECT_NE(e.find("rank 1 called broadcast(float32 x 1, root 1"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 called all_reduce(float32 x 1, SUM"), std::string::npos) << e;
}

TEST(CollectiveMismatch, DifferentRoots) {
  sim::SimWorld w(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kInt64, {2});
    co_await c.reduce(t, c.rank() == 1 ? 1 : 0, ReduceOp::kSum);
  });
  // No frame crosses between ranks that disagree here, so the mismatch
  // surfaces when nothing can move: the deadlock report names both calls.
  EXPECT_FALSE(res.ok());
  std::string all = res.deadlock_report;
  for (int r = 0; r < 4; ++r) all += error_text(res, r) + "\n";
  EXPECT_NE(all.find("collective_mismatch on world #1: rank 0 called reduce(int64 x 2, SUM, root 0, "
                     "binomial_tree) #1; rank 1 called reduce(int64 x 2, SUM, root 1, binomial_tree) #1"),
            std::string::npos)
      << all;
}

TEST(CollectiveMismatch, DifferentForcedAlgorithms) {
  sim::SimWorld w(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {64});
    co_await c.all_reduce(t, ReduceOp::kSum, {},
                          {c.rank() == 0 ? Algorithm::kRing : Algorithm::kHalvingDoubling});
  });
  std::string all;
  for (int r = 0; r < 4; ++r) all += error_text(res, r) + "\n";
  EXPECT_NE(all.find("ring) #1"), std::string::npos) << all;
  EXPECT_NE(all.find("halving_doubling) #1"), std::string::npos) << all;
}

// ---- blocking forms -------------------------------------------------------

TEST(BlockingForms, WaitOutsideTheSimulatorLoopDrivesIt) {
  sim::SimWorld w(2);
  Tensor a(DType::kFloat32, {3}), b(DType::kFloat32, {3});
  a.set(2, 5);
  Work r = w.comm(1).irecv(b, 0);
  Work s = w.comm(0).isend(a, 1);
  r.wait();
  s.wait();
  EXPECT_EQ(b.get(2), 5.0);
  EXPECT_EQ(r.source_rank(), 0);
}

TEST(BlockingForms, WaitWithATimeoutNamesTheOp) {
  sim::SimWorld w(2);
  Tensor b(DType::kFloat32, {3});
  Work r = w.comm(1).irecv(b, 0, 4);
  try {
    r.wait(1'000'000);
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("irecv #1 on world from rank 0 (tag 4, float32 x 3)"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(r.is_completed());
}

TEST(BlockingForms, BlockingWaitInsideASimulatedRankIsAUsageError) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kFloat32, {1});
    if (c.rank() == 0) c.barrier().wait();
    co_return;
  });
  EXPECT_EQ(error_kind(res, 0), ErrorKind::kUsage) << error_text(res, 0);
  EXPECT_NE(error_text(res, 0).find("co_await"), std::string::npos);
}

// ---- reduce_scatter and all_to_all ----------------------------------------

// torch's example: reduce_scatter of [r*n + i + 1 for i] lists; rank i gets
// the sum of every rank's entry i.
TEST(Collectives, ReduceScatterAndAllToAllBothForms) {
  constexpr int n = 3;
  sim::SimWorld w(n);
  std::vector<std::vector<double>> rs(n), rst(n), a2a(n), a2as(n);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    const int r = c.rank();
    std::vector<Tensor> in;
    for (int i = 0; i < n; ++i) in.push_back(Tensor::of(DType::kInt64, {static_cast<double>(r * n + i + 1)}));
    std::vector<TensorView> in_views(in.begin(), in.end());
    Tensor out(DType::kInt64, {1});
    co_await c.reduce_scatter(out, in_views);
    rs[static_cast<std::size_t>(r)] = {out.get(0)};
    Tensor whole = Tensor::of(DType::kInt64, {in[0].get(0), in[1].get(0), in[2].get(0)});
    co_await c.reduce_scatter_tensor(out, whole, ReduceOp::kMax);
    rst[static_cast<std::size_t>(r)] = {out.get(0)};
    std::vector<Tensor> got;  // (copies of a Tensor share its storage)
    for (int i = 0; i < n; ++i) got.emplace_back(DType::kInt64, std::vector<std::int64_t>{1});
    std::vector<TensorView> got_views(got.begin(), got.end());
    co_await c.all_to_all(got_views, in_views);
    for (auto& t : got) a2a[static_cast<std::size_t>(r)].push_back(t.get(0));
    // Uneven: rank r sends j + 1 copies of its value to rank j.
    const std::vector<std::size_t> in_splits = {1, 2, 3};
    const std::vector<std::size_t> out_splits(n, static_cast<std::size_t>(r + 1));
    Tensor src(DType::kInt64, {6}), dst(DType::kInt64, {3 * (r + 1)});
    for (std::size_t i = 0; i < 6; ++i) src.set(i, r);
    co_await c.all_to_all_single(dst, src, out_splits, in_splits);
    for (std::size_t i = 0; i < dst.count(); ++i) a2as[static_cast<std::size_t>(r)].push_back(dst.get(i));
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  // Entry i over ranks: (i+1) + (n+i+1) + (2n+i+1).
  EXPECT_EQ(rs, (std::vector<std::vector<double>>{{12}, {15}, {18}}));
  EXPECT_EQ(rst, (std::vector<std::vector<double>>{{7}, {8}, {9}}));
  EXPECT_EQ(a2a, (std::vector<std::vector<double>>{{1, 4, 7}, {2, 5, 8}, {3, 6, 9}}));
  EXPECT_EQ(a2as, (std::vector<std::vector<double>>{{0, 1, 2}, {0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1, 1, 2, 2, 2}}));
}

TEST(CollectiveValidation, ReduceScatterListsAndSizesFollowTorchsRules) {
  Tensor out(DType::kFloat32, {2});
  std::vector<Tensor> three(3, Tensor(DType::kFloat32, {2}));
  std::vector<TensorView> v(three.begin(), three.end());
  auto e = call_error(4, [&](Communicator& c) { return c.reduce_scatter(out, v); });
  EXPECT_NE(e.find("input_list has 3 tensors but world has 4 ranks"), std::string::npos) << e;
  three[1] = Tensor(DType::kFloat32, {3});
  v.assign(three.begin(), three.end());
  e = call_error(3, [&](Communicator& c) { return c.reduce_scatter(out, v); });
  EXPECT_NE(e.find("input_list[1] is float32 x 3 but the output tensor is float32 x 2"), std::string::npos) << e;
  Tensor in(DType::kFloat32, {7});
  e = call_error(3, [&](Communicator& c) { return c.reduce_scatter_tensor(out, in); });
  EXPECT_NE(e.find("the input tensor is float32 x 7 but world has 3 ranks and the output tensor is float32 x 2 "
                   "(the input needs 6 elements of its dtype)"),
            std::string::npos)
      << e;
  Tensor f6(DType::kFloat32, {6});
  e = call_error(3, [&](Communicator& c) { return c.reduce_scatter_tensor(out, f6, ReduceOp::kBand); });
  EXPECT_NE(e.find("BAND is not defined for float32"), std::string::npos) << e;
}

TEST(CollectiveValidation, AllToAllSplitsFollowTorchsRules) {
  Tensor in(DType::kFloat32, {7}), out(DType::kFloat32, {7});
  auto e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in); });
  EXPECT_NE(e.find("the output tensor is float32 x 7, which does not divide into 3 equal blocks (one per rank of "
                   "world); pass output_split_sizes"),
            std::string::npos)
      << e;
  const std::vector<std::size_t> two = {3, 4}, short_sum = {1, 2, 3}, long_sum = {5, 5, 0}, fits = {2, 2, 3};
  e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in, fits, two); });
  EXPECT_NE(e.find("input_split_sizes has 2 sizes but world has 3 ranks"), std::string::npos) << e;
  e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in, fits, short_sum); });
  EXPECT_NE(e.find("input_split_sizes add up to 6 but the input tensor has 7 elements"), std::string::npos) << e;
  e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in, fits, long_sum); });
  EXPECT_NE(e.find("input_split_sizes add up to more than the input tensor's 7 elements"), std::string::npos) << e;
  // Rank 0's block to itself: 2 in, 3 out.
  const std::vector<std::size_t> self_differs = {3, 2, 2};
  e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in, self_differs, fits); });
  EXPECT_NE(e.find("this rank's block to itself is float32 x 2 in the input but float32 x 3 in the output"),
            std::string::npos)
      << e;
  e = call_error(3, [&](Communicator& c) { return c.all_to_all_single(out, in, fits, fits, {}, {Algorithm::kBruck}); });
  EXPECT_NE(e.find("algorithm 'bruck' needs blocks of one size"), std::string::npos) << e;
  std::vector<Tensor> mixed = {Tensor(DType::kFloat32, {1}), Tensor(DType::kInt32, {1}), Tensor(DType::kFloat32, {1})};
  std::vector<TensorView> mv(mixed.begin(), mixed.end());
  std::vector<Tensor> ok(3, Tensor(DType::kFloat32, {1}));
  std::vector<TensorView> ov(ok.begin(), ok.end());
  e = call_error(3, [&](Communicator& c) { return c.all_to_all(ov, mv); });
  EXPECT_NE(e.find("input block 1 is int32 x 1 but input block 0 is float32 x 1 (one dtype for every block)"),
            std::string::npos)
      << e;
  e = call_error(3, [&](Communicator& c) { return c.all_to_all(std::span<const TensorView>(ov).first(2), ov); });
  EXPECT_NE(e.find("output_list has 2 tensors but world has 3 ranks"), std::string::npos) << e;
}

// Regression for the kind of mistake all_to_all invites: a sender's block
// and its receiver's slot disagree. It is a size error on the receiver,
// naming the sender -- not a hang or a silent truncation.
TEST(CollectiveMismatch, AllToAllBlocksThatDisagreeAreASizeMismatch) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    // Rank 0 sends 2 elements to rank 1, which expects 3.
    const std::vector<std::size_t> in_splits = c.rank() == 0 ? std::vector<std::size_t>{1, 2}
                                                             : std::vector<std::size_t>{1, 1};
    const std::vector<std::size_t> out_splits = c.rank() == 0 ? std::vector<std::size_t>{1, 1}
                                                              : std::vector<std::size_t>{3, 1};
    Tensor in(DType::kFloat32, {c.rank() == 0 ? 3 : 2}), out(DType::kFloat32, {c.rank() == 0 ? 2 : 4});
    co_await c.all_to_all_single(out, in, out_splits, in_splits);
  });
  EXPECT_FALSE(res.ok());
  const std::string e = error_text(res, 1);
  EXPECT_NE(e.find("size_mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("all_to_all_single"), std::string::npos) << e;
  EXPECT_NE(e.find("message from rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("float32 x 2"), std::string::npos) << e;
}

TEST(CollectiveMismatch, ReduceScatterAgainstAllGatherIsAMismatch) {
  sim::SimWorld w(2);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor out(DType::kFloat32, {2}), in(DType::kFloat32, {4});
    if (c.rank() == 0) co_await c.reduce_scatter_tensor(out, in);
    else co_await c.all_gather_into_tensor(in, out);
  });
  EXPECT_FALSE(res.ok());
  const std::string e = error_text(res, 0).empty() ? error_text(res, 1) : error_text(res, 0);
  EXPECT_NE(e.find("collective_mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("reduce_scatter(float32 x 2, SUM"), std::string::npos) << e;
  EXPECT_NE(e.find("all_gather(float32 x 2"), std::string::npos) << e;
}

// ---- edge cases -----------------------------------------------------------

TEST(Collectives, CountZeroAndWorldOneComplete) {
  for (int world : {1, 3}) {
    sim::SimWorld w(world);
    auto res = w.run([&](Communicator& c) -> Task<void> {
      Tensor t(DType::kFloat32, {0});
      for (Algorithm a : algorithms_for(CollectiveKind::kAllReduce))
        co_await c.all_reduce(t, ReduceOp::kSum, {}, {a});
      co_await c.broadcast(t, 0);
      co_await c.reduce(t, 0);
      for (Algorithm a : algorithms_for(CollectiveKind::kReduceScatter))
        co_await c.reduce_scatter_tensor(t, t, ReduceOp::kSum, {}, {a});
      for (Algorithm a : algorithms_for(CollectiveKind::kAllToAll))
        co_await c.all_to_all_single(t, t, {}, {}, {}, {a});
      co_await c.barrier();
    });
    EXPECT_TRUE(res.ok()) << res.describe();
  }
}

TEST(Collectives, AverageDividesByTheGroupSize) {
  sim::SimWorld w(4);
  std::vector<double> out(4);
  auto res = w.run([&](Communicator& c) -> Task<void> {
    Tensor t(DType::kBFloat16, {1});
    t.set(0, c.rank() + 1);
    co_await c.all_reduce(t, ReduceOp::kAvg);
    out[static_cast<std::size_t>(c.rank())] = t.get(0);
  });
  ASSERT_TRUE(res.ok()) << res.describe();
  EXPECT_EQ(out, (std::vector<double>{2.5, 2.5, 2.5, 2.5}));
}

TEST(Collectives, AllReduceIsBitwiseIdenticalOnEveryRankForInexactSums) {
  for (Algorithm a : algorithms_for(CollectiveKind::kAllReduce)) {
    for (int world : {3, 6, 8, 11}) {
      sim::SimWorld w(world);
      std::vector<Tensor> ts;
      for (int r = 0; r < world; ++r) {
        ts.emplace_back(DType::kFloat32, std::vector<std::int64_t>{1001});
        for (std::size_t i = 0; i < 1001; ++i) ts.back().set(i, 1.0 / (r + 3.0) + 1e-3 * static_cast<double>(i));
      }
      auto res = w.run([&](Communicator& c) -> Task<void> {
        co_await c.all_reduce(ts[static_cast<std::size_t>(c.rank())], ReduceOp::kSum, {}, {a});
      });
      ASSERT_TRUE(res.ok()) << res.describe();
      for (int r = 1; r < world; ++r)
        EXPECT_TRUE(reference::bitwise_equal(ts[0], ts[static_cast<std::size_t>(r)]))
            << algorithm_name(a) << " world " << world << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace collie
