// The oracle itself, on cases small enough to check by hand (the seeds'
// examples among them).
#include <gtest/gtest.h>

#include "check/reference.h"

namespace collie::reference {
namespace {

std::vector<Tensor> scalars(DType dt, std::vector<double> vals) {
  std::vector<Tensor> out;
  for (double v : vals) {
    out.emplace_back(dt, std::vector<std::int64_t>{1});
    out.back().set(0, v);
  }
  return out;
}

TEST(Reference, AllReduceSumOfOnesOnFourRanksIsFour) {
  auto out = all_reduce(scalars(DType::kFloat32, {1, 1, 1, 1}), ReduceOp::kSum);
  for (const Tensor& t : out) EXPECT_EQ(t.get(0), 4.0);
}

TEST(Reference, ReduceLeavesNonRootTensorsUnchanged) {
  auto out = reduce(scalars(DType::kFloat32, {1, 2, 3, 4}), 3, ReduceOp::kSum);
  EXPECT_EQ(out[3].get(0), 10.0);
  EXPECT_EQ(out[0].get(0), 1.0);
  EXPECT_EQ(out[1].get(0), 2.0);
  EXPECT_EQ(out[2].get(0), 3.0);
}

TEST(Reference, BoolSumIsOrAndProductIsAnd) {
  auto in = scalars(DType::kBool, {1, 0, 0});
  EXPECT_EQ(all_reduce(in, ReduceOp::kSum)[0].get(0), 1.0);
  EXPECT_EQ(all_reduce(in, ReduceOp::kMax)[0].get(0), 1.0);
  EXPECT_EQ(all_reduce(in, ReduceOp::kProduct)[0].get(0), 0.0);
  EXPECT_EQ(all_reduce(in, ReduceOp::kMin)[0].get(0), 0.0);
}

TEST(Reference, IntegerSumWraps) {
  auto out = all_reduce(scalars(DType::kInt8, {100, 100}), ReduceOp::kSum);
  EXPECT_EQ(out[0].get_int(0), -56);
}

TEST(Reference, AverageDividesTheSumOnce) {
  auto out = all_reduce(scalars(DType::kFloat32, {1, 2, 3, 4}), ReduceOp::kAvg);
  EXPECT_EQ(out[0].get(0), 2.5);
}

TEST(Reference, GatherFillsOnlyTheRootList) {
  auto out = gather(scalars(DType::kFloat32, {0, 1, 2, 3}), 0);
  ASSERT_EQ(out[0].size(), 4u);
  EXPECT_TRUE(out[1].empty());
  EXPECT_EQ(out[0][3].get(0), 3.0);
}

TEST(Reference, PairwiseReductionRoundsInTheButterflysOrder) {
  // float16 has a spacing of 1 at 1024: 1024 + 0.5 rounds to even (1024).
  const auto in = scalars(DType::kFloat16, {1024, 0.5, 0, 0.5});
  const std::vector<const Tensor*> p = {&in[0], &in[1], &in[2], &in[3]};
  // Recursive doubling: (1024 + 0.5) + (0 + 0.5) = 1024 + 0.5 = 1024.
  EXPECT_EQ(pairwise_reduction(p, ReduceOp::kSum, {1, 2}).get(0), 1024.0);
  // Recursive halving: (1024 + 0) + (0.5 + 0.5) = 1025, exactly.
  EXPECT_EQ(pairwise_reduction(p, ReduceOp::kSum, {2, 1}).get(0), 1025.0);
  EXPECT_THROW(pairwise_reduction({p[0], p[1], p[2]}, ReduceOp::kSum, {1}), std::invalid_argument);
  EXPECT_THROW(pairwise_reduction(p, ReduceOp::kAvg, {1, 2}), std::invalid_argument);
}

}  // namespace
}  // namespace collie::reference
