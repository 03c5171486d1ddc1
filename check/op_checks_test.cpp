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
  rec.sends[{0, 1, "world", 5}] = {scalar(DType::kFloat32, 10), scalar(DType::kFloat32, 20)};
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
