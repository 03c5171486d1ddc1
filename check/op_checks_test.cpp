#include "check/op_checks.h"

#include <gtest/gtest.h>

namespace collie::check {
namespace {

Tensor scalar(DType dt, double v) {
  Tensor t(dt, {1});
  t.set(0, v);
  return t;
}

// An all_reduce SUM on ranks {0,1,2} of inputs 1, 2, 3 whose outputs are `out`.
OpRecords all_reduce_of(std::vector<double> out, ReduceOp op = ReduceOp::kSum, CollectiveKind kind = CollectiveKind::kAllReduce,
                        int root = -1) {
  OpRecords rec;
  CollectiveRecord& c = rec.collectives[{"world", 1}];
  c.kind = kind;
  c.where = "t.yaml:3:5";
  c.members = {0, 1, 2};
  c.root = root;
  c.op = op;
  for (int r = 0; r < 3; ++r) {
    c.issued.insert(r);
    c.inputs[r].push_back(scalar(DType::kInt32, r + 1));
    c.outputs[r].push_back(scalar(DType::kInt32, out[static_cast<std::size_t>(r)]));
  }
  return rec;
}

TEST(OpChecks, CorrectAllReducePasses) {
  std::vector<Finding> f;
  EXPECT_EQ(check_collectives(all_reduce_of({6, 6, 6}), f), 1);
  EXPECT_TRUE(f.empty());
}

TEST(OpChecks, WrongValueIsAViolationNamingRankCallAndValues) {
  std::vector<Finding> f;
  check_collectives(all_reduce_of({6, 7, 6}), f);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, Finding::Kind::kViolation);
  EXPECT_EQ(f[0].text, "t.yaml:3:5: all_reduce #1 on world: rank 1 element 0 is 7, the oracle says 6 (inputs at element 0: rank 0 1, rank 1 2, "
            "rank 2 3)");
}

TEST(OpChecks, ReduceNonDestinationChangesAreUnspecifiedNotViolations) {
  std::vector<Finding> f;
  // Root 2 holds the sum; rank 0 was left unchanged, rank 1 holds a partial sum (as Gloo does).
  check_collectives(all_reduce_of({1, 3, 6}, ReduceOp::kSum, CollectiveKind::kReduce, 2), f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Finding::Kind::kUnspecified);
  EXPECT_NE(f[0].text.find("rank 1 element 0 is 3"), std::string::npos) << f[0].text;
  // A wrong root result is a violation.
  f.clear();
  check_collectives(all_reduce_of({1, 2, 5}, ReduceOp::kSum, CollectiveKind::kReduce, 2), f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Finding::Kind::kViolation);
}

TEST(OpChecks, UnfinishedCallsAreLeftToTheOutcome) {
  OpRecords rec = all_reduce_of({6, 7, 6});
  rec.collectives.begin()->second.outputs.erase(1);
  std::vector<Finding> f;
  EXPECT_EQ(check_collectives(rec, f), 0);
  EXPECT_TRUE(f.empty());
}

TEST(OpChecks, ReceivesMatchSendsInOrderPerChannel) {
  OpRecords rec;
  rec.sends[{0, 1, "world", 5}] = {{scalar(DType::kFloat32, 10)}, {scalar(DType::kFloat32, 20)}};
  rec.recvs.push_back(RecvRecord{1, "world", 5, 0, 2, scalar(DType::kFloat32, 20), "t.yaml:9:3"});
  rec.recvs.push_back(RecvRecord{1, "world", 5, 0, 1, scalar(DType::kFloat32, 10), "t.yaml:8:3"});
  std::vector<Finding> f;
  EXPECT_EQ(check_p2p(rec, f), 2);
  EXPECT_TRUE(f.empty());
  // Overtaking: the first posted receive got the second message.
  rec.recvs[0].data = scalar(DType::kFloat32, 10);
  rec.recvs[1].data = scalar(DType::kFloat32, 20);
  check_p2p(rec, f);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].text, "t.yaml:8:3: rank 1: receive from rank 0 (tag 5 on world) holds data that differs from what "
                       "was sent: element 0 is 20.0, expected 10.0");
}

TEST(OpChecks, AReceiveWithoutASendIsAViolation) {
  OpRecords rec;
  rec.recvs.push_back(RecvRecord{1, "world", 0, 3, 1, scalar(DType::kFloat32, 1), ""});
  std::vector<Finding> f;
  check_p2p(rec, f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].text, "rank 1: receive from rank 3 (tag 0 on world) has no matching send");
}

// Found by a torch backend that turned every error into success: rank 0 was
// killed before its send, rank 1's receive "completed" on the buffer it
// already held -- the very values rank 0's program would have sent, which
// its interpreter had recorded just before the kill.
TEST(OpChecks, AReceiveMatchingASendItsCrashedSenderNeverIssuedIsAViolation) {
  OpRecords rec;
  rec.sends[{0, 1, "world", 0}] = {{scalar(DType::kFloat32, 7), 1}, {scalar(DType::kFloat32, 8), 2}};
  rec.recvs.push_back(RecvRecord{1, "world", 0, 0, 1, scalar(DType::kFloat32, 7), "t.yaml:8:3"});
  rec.recvs.push_back(RecvRecord{1, "world", 0, 0, 2, scalar(DType::kFloat32, 8), "t.yaml:9:3"});
  std::vector<Finding> f;
  EXPECT_EQ(check_p2p(rec, f), 2);
  EXPECT_TRUE(f.empty());  // no crash: both are real
  EXPECT_EQ(check_p2p(rec, f, NeverIssued{{0, 2}}), 2);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Finding::Kind::kViolation);
  EXPECT_EQ(f[0].text, "t.yaml:9:3: rank 1: receive from rank 0 (tag 0 on world) completed, but rank 0 never sent the "
                       "message it would match: rank 0's process was killed before its op #2, the send");
  // The send before the crash stays real; another rank's crash voids nothing here.
  f.clear();
  check_p2p(rec, f, NeverIssued{{0, 3}, {2, 1}});
  EXPECT_TRUE(f.empty());
}

// The records of a call on {0,1,2} of `kind` rooted at `root` whose rank 2
// was killed before it (op 5): ranks 0 and 1 completed it with one-element
// outputs (gather's root and all_to_all: one block per member).
OpRecords crashed_call(CollectiveKind kind, int root = -1) {
  OpRecords rec;
  CollectiveRecord& c = rec.collectives[{"world", 3}];
  c.kind = kind;
  c.where = "t.yaml:4:5";
  c.members = {0, 1, 2};
  c.root = root;
  for (int r = 0; r < 3; ++r) {
    c.issued.insert(r);
    c.op_ids[r] = 5;
  }
  const bool per_member = kind == CollectiveKind::kAllToAll || (kind == CollectiveKind::kGather);
  for (int r = 0; r < 2; ++r)
    for (int b = 0; b < (per_member && (kind == CollectiveKind::kAllToAll || r == root) ? 3 : 1); ++b)
      c.outputs[r].push_back(scalar(DType::kFloat32, 1));
  if (kind == CollectiveKind::kBarrier) c.outputs[0].clear(), c.outputs[1].clear();
  return rec;
}

TEST(OpChecks, ACollectiveCompletedWithoutACrashedMembersPartIsAViolation) {
  const NeverIssued crashed{{2, 5}};
  struct Case {
    CollectiveKind kind;
    int root;
    std::vector<int> caught;  // the survivors whose completion is impossible
  };
  const std::vector<Case> cases = {
      {CollectiveKind::kBarrier, -1, {0, 1}},     {CollectiveKind::kAllReduce, -1, {0, 1}},
      {CollectiveKind::kAllGather, -1, {0, 1}},   {CollectiveKind::kReduceScatter, -1, {0, 1}},
      {CollectiveKind::kAllToAll, -1, {0, 1}},    {CollectiveKind::kBroadcast, 2, {0, 1}},
      {CollectiveKind::kBroadcast, 0, {}},        {CollectiveKind::kScatter, 2, {0, 1}},
      {CollectiveKind::kScatter, 1, {}},          {CollectiveKind::kReduce, 1, {1}},
      {CollectiveKind::kGather, 0, {0}},          {CollectiveKind::kMonitoredBarrier, -1, {0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(collective_name(c.kind) + std::string(" root ") + std::to_string(c.root));
    std::vector<Finding> f;
    EXPECT_EQ(check_calls_never_made(crashed_call(c.kind, c.root), crashed, f), 1);
    std::vector<int> caught;
    for (const Finding& x : f) {
      EXPECT_EQ(x.kind, Finding::Kind::kViolation);
      caught.push_back(x.text.find("rank 0 completed") != std::string::npos ? 0 : 1);
    }
    EXPECT_EQ(caught, c.caught);
    // Issued before the crash (op 4 < 5): a real call, nothing to say.
    OpRecords before = crashed_call(c.kind, c.root);
    before.collectives.begin()->second.op_ids[2] = 4;
    f.clear();
    EXPECT_EQ(check_calls_never_made(before, crashed, f), 0);
    EXPECT_TRUE(f.empty());
  }
  std::vector<Finding> f;
  check_calls_never_made(crashed_call(CollectiveKind::kAllReduce), crashed, f);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].text, "t.yaml:4:5: all_reduce #3 on world: rank 0 completed it, but rank 2 never called it (rank 2's "
                       "process was killed before its op #5): the result cannot hold rank 2's part");
  // A call the crashed rank's program never reached at all.
  OpRecords unreached = crashed_call(CollectiveKind::kAllReduce);
  unreached.collectives.begin()->second.issued.erase(2);
  f.clear();
  check_calls_never_made(unreached, crashed, f);
  EXPECT_EQ(f.size(), 2u);
  // Empty parts need nothing.
  OpRecords empty = crashed_call(CollectiveKind::kAllReduce);
  for (auto& [r, outs] : empty.collectives.begin()->second.outputs) outs[0] = Tensor(DType::kFloat32, {0});
  f.clear();
  check_calls_never_made(empty, crashed, f);
  EXPECT_TRUE(f.empty());
}

// A block-wise call on ranks {0,1,2}: rank r's input block j is 10 r + j;
// `out[r]` is rank r's recorded output (one block per entry).
OpRecords block_wise_of(CollectiveKind kind, std::vector<std::vector<double>> out) {
  OpRecords rec;
  CollectiveRecord& c = rec.collectives[{"world", 1}];
  c.kind = kind;
  c.members = {0, 1, 2};
  c.op = ReduceOp::kSum;
  for (int r = 0; r < 3; ++r) {
    c.issued.insert(r);
    for (int j = 0; j < 3; ++j) c.inputs[r].push_back(scalar(DType::kInt32, 10 * r + j));
    for (double v : out[static_cast<std::size_t>(r)]) c.outputs[r].push_back(scalar(DType::kInt32, v));
  }
  return rec;
}

TEST(OpChecks, ReduceScatterGivesEachRankTheReductionOfItsBlock) {
  std::vector<Finding> f;
  // Rank j: (0 + j) + (10 + j) + (20 + j).
  EXPECT_EQ(check_collectives(block_wise_of(CollectiveKind::kReduceScatter, {{30}, {33}, {36}}), f), 1);
  EXPECT_TRUE(f.empty());
  // Rank 1 holding rank 0's block is caught.
  check_collectives(block_wise_of(CollectiveKind::kReduceScatter, {{30}, {30}, {36}}), f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].text, "reduce_scatter #1 on world: rank 1 element 0 is 30, the oracle says 33 (inputs at element 0: rank 0 1, rank 1 11, "
            "rank 2 21)");
}

TEST(OpChecks, AllToAllGivesEachRankItsBlockOfEveryInput) {
  std::vector<Finding> f;
  // Rank r's entry j is rank j's block r: 10 j + r.
  EXPECT_EQ(check_collectives(block_wise_of(CollectiveKind::kAllToAll, {{0, 10, 20}, {1, 11, 21}, {2, 12, 22}}), f), 1);
  EXPECT_TRUE(f.empty());
  // Blocks that arrived in the wrong order (a transposition bug) are caught.
  check_collectives(block_wise_of(CollectiveKind::kAllToAll, {{0, 10, 20}, {1, 21, 11}, {2, 12, 22}}), f);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].text, "all_to_all #1 on world: rank 1 entry 1 element 0 is 21, the oracle says 11 (it holds rank 2's input block 1, "
            "group rank 2)");
}

TEST(OpChecks, BlockWiseCallsWithTheWrongNumberOfInputBlocksAreNotJudged) {
  OpRecords rec = block_wise_of(CollectiveKind::kAllToAll, {{0, 10, 20}, {1, 11, 21}, {2, 12, 22}});
  rec.collectives.begin()->second.inputs[2].pop_back();  // the call was invalid: it failed, not judged here
  std::vector<Finding> f;
  EXPECT_EQ(check_collectives(rec, f), 0);
}

}  // namespace
}  // namespace collie::check
