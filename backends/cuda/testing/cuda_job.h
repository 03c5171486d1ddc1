// Test support: a CUDA world with collie's core on every rank, and a
// StagingDist per rank for programs written with host tensors.
//
// The world's runtime is the test binary's: HostRuntime (host_test_runtime.cpp,
// seeded and configured by the HostRuntimeOptions each test gives), or
// CudaRuntime (cuda_test_runtime.cpp: the same tests as the GPU bundle's
// cuda_transport_gpu_test, where HostRuntimeOptions are ignored but for
// nothing -- the GPUs present are the devices).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_transport.h"
#include "backends/cuda/host_runtime.h"
#include "backends/cuda/testing/staging_dist.h"
#include "core/local_world.h"

namespace collie::cuda::testing {

// The test binary's runtime (see above).
std::unique_ptr<DeviceRuntime> make_test_runtime(const HostRuntimeOptions& options);
// Why the binary's runtime cannot run here ("no CUDA device: ..."), or nullopt.
std::optional<std::string> test_runtime_unavailable();
// Whether the binary runs on HostRuntime (tests of its seeds, its stats and
// its broken variants need it).
bool on_host_runtime();

// At the top of a test: skips it, saying why, where the binary's runtime
// cannot run (and, for HOST_ONLY, where it is not HostRuntime).
#define COLLIE_SKIP_WITHOUT_RUNTIME()                                                                        \
  do {                                                                                                       \
    if (auto why_not = ::collie::cuda::testing::test_runtime_unavailable()) GTEST_SKIP() << *why_not;        \
  } while (0)
#define COLLIE_SKIP_UNLESS_HOST_RUNTIME()                                                                    \
  do {                                                                                                       \
    if (!::collie::cuda::testing::on_host_runtime()) GTEST_SKIP() << "needs HostRuntime (seeds, broken variants)"; \
  } while (0)

struct TestWorld {
  std::unique_ptr<CudaWorld> world;
  std::unique_ptr<LocalWorld> local;
  std::vector<std::unique_ptr<StagingDist>> staging;

  TestWorld(int n, const HostRuntimeOptions& ho, TransportBug bug = TransportBug::kNone,
            std::size_t eager_threshold_bytes = 64 * 1024) {
    world = std::make_unique<CudaWorld>(make_test_runtime(ho), CudaWorldOptions{n, bug});
    std::vector<Transport*> ts;
    for (int r = 0; r < n; ++r) ts.push_back(&world->transport(r));
    CommunicatorOptions co;
    co.eager_threshold_bytes = eager_threshold_bytes;
    local = std::make_unique<LocalWorld>(std::move(ts), co);
    for (int r = 0; r < n; ++r) staging.push_back(std::make_unique<StagingDist>(local->comm(r), *world));
  }
  ~TestWorld() {
    staging.clear();  // their copies back hold device memory of the world
    local.reset();    // communicators before the transports
  }
  HostRuntime& runtime() { return static_cast<HostRuntime&>(world->runtime()); }
  // Runs `program` on every rank with host tensors (staged).
  RunResult run_staged(const std::function<Task<void>(Dist&)>& program) {
    return local->run([this, &program](Communicator& c) { return program(*staging[static_cast<std::size_t>(c.rank())]); });
  }
};

// The world configurations the transport must pass on.
struct WorldSetup {
  const char* name;
  int devices;
  bool peer_access;
};
inline constexpr WorldSetup kSetups[] = {{"one device", 1, true},
                                         {"two devices with peer access", 2, true},
                                         {"three devices without peer access", 3, false}};
// The setups a test loops over: all three on HostRuntime; on CudaRuntime
// the devices are the machine's, so one.
inline std::span<const WorldSetup> setups() {
  return on_host_runtime() ? std::span<const WorldSetup>(kSetups) : std::span<const WorldSetup>(kSetups, 1);
}

inline constexpr CollectiveKind kCollectives[] = {
    CollectiveKind::kBroadcast, CollectiveKind::kReduce,        CollectiveKind::kAllReduce,
    CollectiveKind::kScatter,   CollectiveKind::kGather,        CollectiveKind::kAllGather,
    CollectiveKind::kBarrier,   CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll};

// How one test case on a fresh world ended.
struct CaseRun {
  std::string failure;  // empty: passed
  std::string what;     // the case, for messages
};

// Runs `body` on a fresh world of `n` ranks set up as `setup`, with the
// HostRuntime seeded by `seed`; an exception (a runtime that failed) is
// the case's failure too.
inline CaseRun run_in_world(std::string what, int n, std::uint64_t seed, const WorldSetup& setup,
                            std::size_t eager_threshold_bytes, const std::function<std::string(TestWorld&)>& body,
                            HostRuntimeBug bug = HostRuntimeBug::kNone, TransportBug tbug = TransportBug::kNone) {
  CaseRun out;
  out.what = std::move(what) + ", " + setup.name + ", seed " + std::to_string(seed);
  try {
    TestWorld w(n, {.seed = seed, .devices = setup.devices, .peer_access = setup.peer_access, .bug = bug}, tbug,
                eager_threshold_bytes);
    out.failure = body(w);
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
  return out;
}

}  // namespace collie::cuda::testing
