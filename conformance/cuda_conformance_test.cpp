// The CUDA transport on HostRuntime held to conformance/: collie's core on
// device tensors, host tensors staged around every op (StagingDist), every
// collective checked against the reference oracle on random cases
// (conformance's generator: groups, dtypes, reduce ops, counts, roots,
// algorithms; deep ones too) and random point-to-point traffic, over many
// seeds and three world setups; and the conformance suite itself (scenarios
// and generated cases, crashes aside) on cuda:host, which must pass, and on
// each broken runtime, which must fail.
#include "backends/cuda/cuda_transport.h"

#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <set>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/host_runtime.h"
#include "backends/cuda/staging.h"
#include "backends/cuda/testing/cuda_job.h"
#include "backends/registry.h"
#include "conformance/collective_check.h"
#include "conformance/suite.h"
#include "core/error.h"
#include "core/local_world.h"
#include "sim/prng.h"

namespace collie::cuda {
namespace {

using conformance::CaseOutcome;
using conformance::CollectiveCase;

using testing::kCollectives;
using testing::kSetups;
using testing::TestWorld;
using testing::CaseRun;
using testing::run_in_world;
using testing::WorldSetup;

// conformance's RunOnEveryRank over a TestWorld's staged host tensors.
conformance::RunOnEveryRank host_tensors(TestWorld& w) {
  return [&w](const DistProgram& p) { return w.run_staged(p); };
}

// Case `seed` of `op`: a random case (conformance's generator) on a world of
// 1-7 ranks whose HostRuntime interleaves by the same seed; eager
// threshold small every other seed, so that rendezvous payloads land.
CaseRun run_case(CollectiveKind op, std::uint64_t seed, const WorldSetup& setup, bool deep = false) {
  sim::Prng prng(seed * 7919 + static_cast<std::uint64_t>(op));
  const int n = 1 + static_cast<int>(prng.below(7));
  const CollectiveCase c = conformance::random_case(op, n, prng, deep);
  const std::string what = c.describe() + " on " + std::to_string(n) + " ranks";
  return run_in_world(what, n, seed, setup, seed % 2 ? 256 : 64 * 1024, [&](TestWorld& w) {
    return conformance::run_and_check(host_tensors(w), n, {c}, true, what).failure;
  });
}

CaseRun run_traffic(std::uint64_t seed, const WorldSetup& setup) {
  sim::Prng prng(seed);
  const int n = 2 + static_cast<int>(prng.below(5));
  const std::string what = "p2p traffic on " + std::to_string(n) + " ranks";
  return run_in_world(what, n, seed, setup, seed % 2 ? 256 : 64 * 1024, [&](TestWorld& w) {
    return conformance::run_p2p_traffic(host_tensors(w), n, prng, 12, what).failure;
  });
}

constexpr int kSeeds = 60;  // per collective and setup: 9 x 3 x 60 cases, plus 3 x 30 of p2p traffic

TEST(CudaTransport, EveryCollectiveOnDeviceTensorsMatchesTheOracleOnEverySeed) {
  int cases = 0;
  for (const WorldSetup& setup : testing::setups())
    for (CollectiveKind op : kCollectives)
      for (int seed = 1; seed <= kSeeds; ++seed, ++cases) {
        const CaseRun r = run_case(op, static_cast<std::uint64_t>(seed), setup);
        ASSERT_EQ(r.failure, "") << r.what;
      }
  EXPECT_EQ(cases, 3 * 9 * kSeeds);
}

// Past the first 20 cases conformance goes deeper: counts below the world
// size and up to MiBs (rendezvous payloads landing in place, big kernels).
TEST(CudaTransport, DeepCasesMatchTheOracle) {
  for (CollectiveKind op : kCollectives)
    for (int seed = 1; seed <= 3; ++seed) {
      const CaseRun r = run_case(op, static_cast<std::uint64_t>(seed), kSetups[1], true);
      ASSERT_EQ(r.failure, "") << r.what;
    }
}

TEST(CudaTransport, PointToPointTrafficArrivesInOrderOnEverySeed) {
  for (const WorldSetup& setup : testing::setups())
    for (int seed = 1; seed <= kSeeds / 2; ++seed) {  // each moves up to 12 x 6 messages of up to 160 KB
      const CaseRun r = run_traffic(static_cast<std::uint64_t>(seed), setup);
      ASSERT_EQ(r.failure, "") << r.what;
    }
}

// ---- the suite -----------------------------------------------------------------

// `collie conformance --backend NAME`: the builtin registry's cuda job
// (backends/in_process_job.cpp with HostTensorDist), crashes included.
conformance::SuiteResult suite(const std::string& name) {
  conformance::SuiteOptions so;
  so.backend = name;
  so.scenario_dirs = {std::string(COLLIE_SOURCE_DIR) + "/scenarios"};
  so.timeout_ns = 20'000'000'000;
  return conformance::run_conformance(so);
}

TEST(CudaConformance, TheSuitePassesOnCudaHost) {
  const conformance::SuiteResult r = suite("cuda:host");
  EXPECT_TRUE(r.passed()) << conformance::format_matrix(r);
  EXPECT_GT(r.cases.size(), 400u);
  std::set<std::string> features;
  for (const auto& c : r.cases) features.insert(c.feature);
  EXPECT_TRUE(features.count("crashes")) << "the crashes feature did not run on cuda:host";
}

// The suite's acceptance test for runtimes: each broken HostRuntime fails
// it, with the features it breaks (reduce_skips_wait: only those that
// reduce).
class BrokenRuntimeSuite : public ::testing::TestWithParam<HostRuntimeBug> {};

TEST_P(BrokenRuntimeSuite, Fails) {
  const std::string name = "cuda:host:" + std::string(host_runtime_bug_name(GetParam()));
  const conformance::SuiteResult r = suite(name);
  EXPECT_FALSE(r.passed()) << name << " passed the suite";
  std::set<std::string> failed;
  for (const auto& c : r.cases)
    if (!c.passed && !c.skipped) failed.insert(c.feature);
  EXPECT_TRUE(failed.count("all_reduce")) << conformance::format_matrix(r);
  if (GetParam() == HostRuntimeBug::kReduceSkipsWait) {
    EXPECT_FALSE(failed.count("all_gather") || failed.count("broadcast") || failed.count("p2p"))
        << "a reduction skipping its wait broke features without reductions:\n" << conformance::format_matrix(r);
  }
  std::cout << name << ": " << r.failed() << " of " << r.cases.size() << " cases fail, in";
  for (const auto& f : failed) std::cout << " " << f;
  std::cout << "\n";
}

INSTANTIATE_TEST_SUITE_P(EachBug, BrokenRuntimeSuite,
                         ::testing::Values(HostRuntimeBug::kEarlyEvent, HostRuntimeBug::kWrongStreamCopy,
                                           HostRuntimeBug::kReduceSkipsWait, HostRuntimeBug::kFreeWhileInUse),
                         [](const auto& p) { return std::string(host_runtime_bug_name(p.param)); });

}  // namespace
}  // namespace collie::cuda
