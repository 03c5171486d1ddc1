// The CUDA transport on HostRuntime: collie's Communicator with device
// tensors, every collective and point-to-point traffic checked against the
// oracle (conformance/collective_check.h, through StagingDist) over many
// seeds, on one device, on two with peer access and on three without;
// failures (a crash, a timeout, a deadlock) as core/transport.h wants them;
// and the acceptance test of the whole instrument: a transport that forgets
// its one event wait, or completes sends early, and each broken runtime,
// give wrong values or errors naming the class for some seed within a few,
// the same on replay -- while the correct pair passes every seed.
#include "backends/cuda/cuda_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/host_runtime.h"
#include "backends/cuda/staging.h"
#include "backends/cuda/testing/staging_dist.h"
#include "conformance/collective_check.h"
#include "core/error.h"
#include "core/local_world.h"
#include "sim/prng.h"

namespace collie::cuda {
namespace {

using conformance::CaseOutcome;
using conformance::CollectiveCase;

// A CUDA world on a HostRuntime, collie's core on every rank, and a
// StagingDist per rank for programs written with host tensors.
struct Job {
  std::unique_ptr<CudaWorld> world;
  std::unique_ptr<LocalWorld> local;
  std::vector<std::unique_ptr<testing::StagingDist>> staging;

  Job(int n, const HostRuntimeOptions& ho, TransportBug bug = TransportBug::kNone,
      std::size_t eager_threshold_bytes = 64 * 1024) {
    world = std::make_unique<CudaWorld>(std::make_unique<HostRuntime>(ho), CudaWorldOptions{n, bug});
    std::vector<Transport*> ts;
    for (int r = 0; r < n; ++r) ts.push_back(&world->transport(r));
    CommunicatorOptions co;
    co.eager_threshold_bytes = eager_threshold_bytes;
    local = std::make_unique<LocalWorld>(std::move(ts), co);
    for (int r = 0; r < n; ++r) staging.push_back(std::make_unique<testing::StagingDist>(local->comm(r), *world));
  }
  ~Job() {
    staging.clear();  // their copies back hold device memory of the world
    local.reset();    // communicators before the transports
  }
  HostRuntime& runtime() { return static_cast<HostRuntime&>(world->runtime()); }
  // conformance's RunOnEveryRank over host tensors.
  conformance::RunOnEveryRank host_tensors() {
    return [this](const DistProgram& p) {
      return local->run([this, &p](Communicator& c) { return p(*staging[static_cast<std::size_t>(c.rank())]); });
    };
  }
};

// One world configuration the transport must pass on.
struct WorldSetup {
  const char* name;
  int devices;
  bool peer_access;
};
constexpr WorldSetup kSetups[] = {{"one device", 1, true}, {"two devices with peer access", 2, true},
                             {"three devices without peer access", 3, false}};

constexpr CollectiveKind kCollectives[] = {
    CollectiveKind::kBroadcast, CollectiveKind::kReduce,        CollectiveKind::kAllReduce,
    CollectiveKind::kScatter,   CollectiveKind::kGather,        CollectiveKind::kAllGather,
    CollectiveKind::kBarrier,   CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};

// Case `seed` of `op`: a random case (conformance's generator) on a world of
// 1-7 ranks whose HostRuntime interleaves by the same seed; eager
// threshold small every other seed, so that rendezvous payloads land.
struct CaseRun {
  std::string failure;  // empty: passed
  std::string what;     // the case, for messages
};
CaseRun run_case(CollectiveKind op, std::uint64_t seed, const WorldSetup& setup, HostRuntimeBug bug = HostRuntimeBug::kNone,
                 TransportBug tbug = TransportBug::kNone, bool deep = false) {
  sim::Prng prng(seed * 7919 + static_cast<std::uint64_t>(op));
  const int n = 1 + static_cast<int>(prng.below(7));
  const CollectiveCase c = conformance::random_case(op, n, prng, deep);
  Job job(n, {.seed = seed, .devices = setup.devices, .peer_access = setup.peer_access, .bug = bug}, tbug,
          seed % 2 ? 256 : 64 * 1024);
  CaseRun out;
  out.what = c.describe() + " on " + std::to_string(n) + " ranks, " + setup.name + ", seed " + std::to_string(seed);
  try {
    out.failure = conformance::run_and_check(job.host_tensors(), n, {c}, true, out.what).failure;
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
  return out;
}

CaseRun run_traffic(std::uint64_t seed, const WorldSetup& setup, HostRuntimeBug bug = HostRuntimeBug::kNone,
                    TransportBug tbug = TransportBug::kNone) {
  sim::Prng prng(seed);
  const int n = 2 + static_cast<int>(prng.below(5));
  Job job(n, {.seed = seed, .devices = setup.devices, .peer_access = setup.peer_access, .bug = bug}, tbug,
          seed % 2 ? 256 : 64 * 1024);
  CaseRun out;
  out.what = "p2p traffic on " + std::to_string(n) + " ranks, " + setup.name + ", seed " + std::to_string(seed);
  try {
    out.failure = conformance::run_p2p_traffic(job.host_tensors(), n, prng, 12, out.what).failure;
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
  return out;
}

constexpr int kSeeds = 60;  // per collective and setup: 9 x 3 x 60 cases, plus 3 x 30 of p2p traffic

TEST(CudaTransport, EveryCollectiveOnDeviceTensorsMatchesTheOracleOnEverySeed) {
  int cases = 0;
  for (const WorldSetup& setup : kSetups)
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
      const CaseRun r = run_case(op, static_cast<std::uint64_t>(seed), kSetups[1], HostRuntimeBug::kNone,
                                 TransportBug::kNone, true);
      ASSERT_EQ(r.failure, "") << r.what;
    }
}

TEST(CudaTransport, PointToPointTrafficArrivesInOrderOnEverySeed) {
  for (const WorldSetup& setup : kSetups)
    for (int seed = 1; seed <= kSeeds / 2; ++seed) {  // each moves up to 12 x 6 messages of up to 160 KB
      const CaseRun r = run_traffic(static_cast<std::uint64_t>(seed), setup);
      ASSERT_EQ(r.failure, "") << r.what;
    }
}

TEST(CudaTransport, RanksTakeDeviceTensorsOnlyAndSayWhy) {
  Job job(2, {});
  EXPECT_EQ(job.world->transport(0).memory_space(), MemorySpace::kDevice);
  Tensor host = Tensor::of(DType::kFloat32, {1, 2});
  try {
    (void)job.local->comm(0).all_reduce(host);
    FAIL() << "a host tensor was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(
                  "tensor is in host memory, but this rank's transport keeps tensors in device memory"),
              std::string::npos)
        << e.what();
  }
}

TEST(CudaTransport, RanksArePlacedOnDevicesRoundRobinEachWithItsOwnStream) {
  Job job(5, {.devices = 2});
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(job.world->device(r), r % 2);
    for (int q = 0; q < r; ++q) EXPECT_FALSE(job.world->stream(r) == job.world->stream(q));
  }
}

// Device tensors used directly (no staging wrapper): rank 0 sends a 4 MiB
// tensor (rendezvous: it lands in rank 1's buffer) and a small one (eager),
// then both all_reduce a tensor of their own.
TEST(CudaTransport, DeviceTensorsRoundTripThroughTheCommunicatorDirectly) {
  for (int seed = 1; seed <= 5; ++seed) {
    Job job(2, {.seed = static_cast<std::uint64_t>(seed), .devices = 2});
    CudaWorld& w = *job.world;
    constexpr std::size_t kBig = 1 << 20;
    Tensor big = Tensor::zeros(DType::kFloat32, {kBig}), small = Tensor::of(DType::kInt32, {1, 2, 3});
    for (std::size_t i = 0; i < kBig; ++i) big.set(i, static_cast<double>(i % 1000));
    std::vector<Tensor> got(2);
    const RunResult res = job.local->run([&](Communicator& c) -> Task<void> {
      const int r = c.rank();
      DeviceTensor a = to_device(w, r, big.view()), b = to_device(w, r, small.view());
      if (r == 1) {
        copy_to_device(w, r, Tensor::zeros(DType::kFloat32, {kBig}).view(), a.view());
        copy_to_device(w, r, Tensor::zeros(DType::kInt32, {3}).view(), b.view());
      }
      if (r == 0) {
        co_await c.send(a, 1, 0);
        co_await c.send(b, 1, 1);
      } else {
        co_await c.recv(a, 0, 0);
        co_await c.recv(b, 0, 1);
      }
      co_await c.all_reduce(b);
      got[static_cast<std::size_t>(r)] = to_host(w, r, b.view());
      if (r == 1) {
        EXPECT_EQ(std::memcmp(to_host(w, r, a.view()).data(), big.data(), big.bytes()), 0) << seed;
      }
    });
    ASSERT_TRUE(res.ok()) << res.describe();
    for (int r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(got[static_cast<std::size_t>(r)].get(i), 2.0 * (i + 1)) << seed;
  }
}

TEST(CudaTransport, ACrashedRanksPeersAreToldAndTheRestCarryOn) {
  Job job(3, {.seed = 4});
  CudaWorld& w = *job.world;
  std::vector<std::string> errors(3);
  const RunResult res = job.local->run([&](Communicator& c) -> Task<void> {
    const int r = c.rank();
    DeviceTensor t = to_device(w, r, Tensor::of(DType::kFloat32, {1, 2, 3}).view());
    if (r == 2) {
      w.crash(2, "crashed by the test");
      co_await c.recv(t, 0, 0);  // never resumes
    }
    if (r == 0) {
      try {
        co_await c.recv(t, 2, 0);
      } catch (const Error& e) {
        errors[0] = e.what();
      }
      co_await c.send(t, 1, 5);
    }
    if (r == 1) co_await c.recv(t, 0, 5);
  }, RunContext{"seed 4", "", nullptr, [&w](int r) { return w.crashed(r); }});
  EXPECT_TRUE(res.ranks[0].finished && res.ranks[1].finished && res.ranks[2].crashed) << res.describe();
  EXPECT_FALSE(res.deadlocked) << res.describe();
  EXPECT_NE(errors[0].find("lost rank 2: crashed by the test"), std::string::npos) << errors[0];
}

TEST(CudaTransport, ATimeoutFiresWhenNothingElseCanHappen) {
  Job job(2, {});
  std::string error;
  const RunResult res = job.local->run([&](Communicator& c) -> Task<void> {
    const Group g = c.new_group({0, 1}, 1000);  // every rank creates it
    if (c.rank() != 0) co_return;
    DeviceTensor t = to_device(*job.world, 0, Tensor::of(DType::kFloat32, {1}).view());
    try {
      co_await c.recv(t, 1, 0, g);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  EXPECT_TRUE(res.ok()) << res.describe();
  EXPECT_NE(error.find("did not complete within 1 us"), std::string::npos) << error;
}

TEST(CudaTransport, ADeadlockIsReportedNotHung) {
  Job job(2, {});
  const RunResult res = job.local->run([&](Communicator& c) -> Task<void> {
    DeviceTensor t = to_device(*job.world, c.rank(), Tensor::of(DType::kFloat32, {1}).view());
    co_await c.recv(t, 1 - c.rank(), 0);  // both receive first
  });
  EXPECT_TRUE(res.deadlocked);
  EXPECT_EQ(res.blocked_ranks.size(), 2u);
}

TEST(CudaTransport, ASeedReplaysTheSameInterleaving) {
  auto run = [](std::uint64_t seed) {
    sim::Prng prng(99);
    const CollectiveCase c = conformance::random_case(CollectiveKind::kAllReduce, 5, prng);
    Job job(5, {.seed = seed, .devices = 2});
    EXPECT_EQ(conformance::run_and_check(job.host_tensors(), 5, {c}, true).failure, "");
    const HostRuntimeStats s = job.runtime().stats();
    return std::make_tuple(job.world->events(), s.executed, s.polls, s.idle_polls);
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

// ---- the acceptance test: broken transports and broken runtimes fail -------

// Runs cases (every collective in turn, then p2p traffic) with seeds
// 1, 2, ... until one fails; returns it, after checking that its seed
// replays the same failure. Empty when none of `limit` failed.
std::string first_failure(const std::function<CaseRun(std::uint64_t seed, int which)>& run, int limit) {
  for (int i = 0; i < limit; ++i) {
    const auto seed = static_cast<std::uint64_t>(i / 10 + 1);
    const CaseRun r = run(seed, i % 10);
    if (r.failure.empty()) continue;
    EXPECT_EQ(run(seed, i % 10).failure, r.failure) << "the failing seed does not replay: " << r.what;
    return r.what + ": " + r.failure;
  }
  return {};
}

CaseRun any_case(std::uint64_t seed, int which, HostRuntimeBug bug, TransportBug tbug) {
  const WorldSetup& setup = kSetups[1];
  if (which == 9) return run_traffic(seed, setup, bug, tbug);
  return run_case(kCollectives[which], seed, setup, bug, tbug);
}

constexpr int kAcceptanceCases = 60;  // "within a few seeds": 6 seeds of the 10 kinds of case

TEST(CudaTransportBugs, ForgettingThePeerWaitGivesWrongValuesForSomeSeed) {
  const std::string f = first_failure(
      [](std::uint64_t seed, int which) {
        return any_case(seed, which, HostRuntimeBug::kNone, TransportBug::kSkipsPeerWait);
      },
      kAcceptanceCases);
  ASSERT_NE(f, "") << "a transport that never waits for the sender's event passed " << kAcceptanceCases << " cases";
  EXPECT_EQ(f.find("host runtime"), std::string::npos) << "a wrong value, not a runtime error: " << f;
}

TEST(CudaTransportBugs, CompletingSendsEarlyLetsTheSenderOverwriteWhatIsStillBeingRead) {
  // The buffer_reuse pattern on device tensors: rank 0 sends round i's
  // values from one buffer and, once the send completed, writes round
  // i+1's into it; rank 1 must get every round's own values.
  constexpr int kRounds = 16;
  auto run = [](std::uint64_t seed, TransportBug bug) {
    Job job(2, {.seed = seed}, bug);
    CudaWorld& w = *job.world;
    std::vector<double> got;
    const RunResult res = job.local->run([&](Communicator& c) -> Task<void> {
      auto round = [](int i) { return Tensor::of(DType::kFloat32, {1.0 * i, 2.0 * i, 3.0 * i, 4.0 * i}); };
      if (c.rank() == 0) {
        DeviceTensor t(w, 0, DType::kFloat32, 4);
        for (int i = 0; i < kRounds; ++i) {
          copy_to_device(w, 0, round(i).view(), t.view());
          co_await c.send(t, 1, 0);
        }
      } else {
        std::vector<DeviceTensor> slots;
        std::vector<Work> works;
        for (int i = 0; i < kRounds; ++i) {
          slots.push_back(to_device(w, 1, Tensor::zeros(DType::kFloat32, {4}).view()));
          works.push_back(c.irecv(slots.back(), 0, 0));
        }
        co_await wait_all(works);
        for (const DeviceTensor& s : slots) {
          const Tensor h = to_host(w, 1, s.view());
          for (std::size_t k = 0; k < 4; ++k) got.push_back(h.get(k));
        }
      }
    });
    EXPECT_TRUE(res.ok()) << res.describe();
    return got;
  };
  std::vector<double> want;
  for (int i = 0; i < kRounds; ++i)
    for (int k = 1; k <= 4; ++k) want.push_back(1.0 * k * i);
  int wrong = 0;
  for (int seed = 1; seed <= 20 && !wrong; ++seed)
    if (run(static_cast<std::uint64_t>(seed), TransportBug::kCompletesSendsEarly) != want) wrong = seed;
  EXPECT_GT(wrong, 0) << "sends completed before their reader ran, yet every seed got each round's values";
  if (wrong) {
    EXPECT_EQ(run(static_cast<std::uint64_t>(wrong), TransportBug::kCompletesSendsEarly),
              run(static_cast<std::uint64_t>(wrong), TransportBug::kCompletesSendsEarly));
  }
  for (int seed = 1; seed <= 20; ++seed) EXPECT_EQ(run(static_cast<std::uint64_t>(seed), TransportBug::kNone), want);
}

class BrokenRuntime : public ::testing::TestWithParam<HostRuntimeBug> {};

TEST_P(BrokenRuntime, FailsCasesThatTheCorrectRuntimePasses) {
  const HostRuntimeBug bug = GetParam();
  const std::string f = first_failure(
      [bug](std::uint64_t seed, int which) { return any_case(seed, which, bug, TransportBug::kNone); },
      kAcceptanceCases);
  ASSERT_NE(f, "") << "cuda:host:" << host_runtime_bug_name(bug) << " passed " << kAcceptanceCases << " cases";
  // A use after free is named as one; the others show as wrong values.
  if (bug == HostRuntimeBug::kFreeWhileInUse) {
    EXPECT_NE(f.find("was freed before this operation ran"), std::string::npos) << f;
  }
  std::cout << "cuda:host:" << host_runtime_bug_name(bug) << " fails: " << f.substr(0, 400) << "\n";
}

INSTANTIATE_TEST_SUITE_P(EachBug, BrokenRuntime,
                         ::testing::Values(HostRuntimeBug::kEarlyEvent, HostRuntimeBug::kWrongStreamCopy,
                                           HostRuntimeBug::kReduceSkipsWait, HostRuntimeBug::kFreeWhileInUse),
                         [](const auto& p) { return std::string(host_runtime_bug_name(p.param)); });

// ---- the factory ------------------------------------------------------------

TEST(CudaBackend, NamesParseIntoSpecsAndBuildWorlds) {
  const std::vector<std::string> names = cuda_backend_names();
  ASSERT_EQ(names.size(), 6u);
  EXPECT_EQ(names[0], "cuda");
  for (const std::string& n : names) {
    const auto spec = parse_cuda_backend(n);
    ASSERT_TRUE(spec) << n;
    EXPECT_FALSE(cuda_backend_description(*spec).empty());
  }
  EXPECT_FALSE(parse_cuda_backend("cuda:hostile"));
  EXPECT_FALSE(parse_cuda_backend("cuda:host:none"));
  EXPECT_FALSE(parse_cuda_backend("tcp"));
  BackendOptions o;
  o.world_size = 3;
  o.seed = 5;
  auto world = make_cuda_backend(*parse_cuda_backend("cuda:host:early_event"), o);
  EXPECT_EQ(world->world_size(), 3);
  EXPECT_EQ(world->runtime().name(), "host:early_event");
  EXPECT_EQ(world->runtime().device_count(), 2);
  EXPECT_FALSE(cuda_backend_unavailable(*parse_cuda_backend("cuda:host")));
  if (auto why = cuda_backend_unavailable(*parse_cuda_backend("cuda"))) {
    EXPECT_THROW(make_cuda_backend(*parse_cuda_backend("cuda"), o), Error);
    std::cout << "cuda unavailable here: " << *why << "\n";
  }
}

}  // namespace
}  // namespace collie::cuda
