// HostRuntime against device_runtime.h, and against the three mistakes it
// exists to expose: a missing wait, a read before the copy that fills it,
// a buffer reused before the work reading it ran -- each must give a wrong
// value for some seed within a few, the same one every time the seed runs
// -- plus the guarded arena (a host access dies naming it), the checked
// operations, the arithmetic of elementwise.h bit for bit, and each broken
// variant doing exactly its one wrong thing.
#include "backends/cuda/host_runtime.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "backends/cuda/testing/runtime_contract.h"
#include "core/error.h"

namespace collie::cuda {
namespace {

using contract::RuntimeContract;

constexpr int kSeeds = 20;  // "within a few seeds": every mistake below shows well before this

std::vector<float> values(std::size_t n, float first) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

std::vector<float> download(HostRuntime& rt, const void* p, std::size_t n, Stream s) {
  std::vector<float> out(n);
  rt.copy(out.data(), p, n * sizeof(float), s);
  return out;
}

void upload(HostRuntime& rt, void* p, const std::vector<float>& v, Stream s) {
  rt.copy(p, v.data(), v.size() * sizeof(float), s);
}

// Runs `scenario(seed)` for seeds 1..kSeeds; returns the first seed whose
// result is wrong (0: none), checking that a wrong seed replays alike.
int first_wrong_seed(const std::function<std::vector<float>(std::uint64_t)>& scenario, const std::vector<float>& want) {
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const std::vector<float> got = scenario(static_cast<std::uint64_t>(seed));
    if (got == want) continue;
    EXPECT_EQ(scenario(static_cast<std::uint64_t>(seed)), got) << "seed " << seed << " does not replay";
    return seed;
  }
  return 0;
}

// `scenario(seed, broken)` gives a wrong value for some seed when broken
// (the same one when replayed), and `want` for every seed when not.
void expect_wrong_only_when_broken(const std::function<std::vector<float>(std::uint64_t, bool)>& scenario,
                                   const std::vector<float>& want) {
  EXPECT_GT(first_wrong_seed([&](std::uint64_t seed) { return scenario(seed, true); }, want), 0)
      << "no seed in 1.." << kSeeds << " showed the mistake";
  for (int seed = 1; seed <= kSeeds; ++seed) EXPECT_EQ(scenario(static_cast<std::uint64_t>(seed), false), want) << seed;
}

TEST(HostRuntime, AMissingWaitGivesAWrongValueForSomeSeedAndTheWaitFixesEverySeed) {
  const std::vector<float> want = values(64, 1);
  auto scenario = [&](std::uint64_t seed, bool broken) {
    const bool wait = !broken;
    HostRuntime rt({.seed = seed});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0);
    void* a = rt.allocate(256, s0);
    void* b = rt.allocate(256, s1);
    const Event written = rt.create_event(0);
    upload(rt, a, want, s0);
    rt.record(written, s0);
    if (wait) rt.wait(s1, written);
    rt.copy(b, a, 256, s1);  // s1 reads what s0 writes
    return download(rt, b, 64, s1);
  };
  expect_wrong_only_when_broken(scenario, want);
}

TEST(HostRuntime, AHostReadBeforeTheCopyCompletedSeesTheOldBytesForSomeSeed) {
  const std::vector<float> want = values(64, 7);
  auto scenario = [&](std::uint64_t seed, bool broken) {
    HostRuntime rt({.seed = seed});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0);
    void* a = rt.allocate(256, s0);
    upload(rt, a, want, s0);
    return download(rt, a, 64, broken ? s1 : s0);  // s1 has nothing to wait for
  };
  expect_wrong_only_when_broken(scenario, want);
}

TEST(HostRuntime, ABufferReusedBeforeItsReaderRanGivesTheNewValuesForSomeSeed) {
  const std::vector<float> first = values(64, 1), second = values(64, 1000);
  auto scenario = [&](std::uint64_t seed, bool broken) {
    HostRuntime rt({.seed = seed});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0);
    void* a = rt.allocate(256, s0);
    void* b = rt.allocate(256, s1);
    const Event written = rt.create_event(0), read = rt.create_event(0);
    upload(rt, a, first, s0);
    rt.record(written, s0);
    rt.wait(s1, written);
    rt.copy(b, a, 256, s1);
    rt.record(read, s1);
    if (!broken) rt.wait(s0, read);
    upload(rt, a, second, s0);  // the sender reuses its buffer
    return download(rt, b, 64, s1);
  };
  expect_wrong_only_when_broken(scenario, first);
}

TEST(HostRuntime, WorkRunsLateOnlyAsTheHostPolls) {
  HostRuntime rt({.seed = 3});
  const Stream s = rt.create_stream(0);
  void* a = rt.allocate(64, s);
  const Event e = rt.create_event(0);
  EXPECT_TRUE(rt.query(e)) << "an event never recorded is complete";
  const std::vector<float> v = values(16, 1);
  upload(rt, a, v, s);
  rt.record(e, s);
  EXPECT_EQ(rt.stats().executed, 0u) << "nothing runs when queued";
  int polls = 0;
  while (!rt.query(e)) ++polls;
  EXPECT_EQ(rt.stats().executed, 2u);
  EXPECT_EQ(download(rt, a, 16, s), v);
  // Some polls run nothing: that lateness is what exposes missing waits.
  HostRuntime idle({.seed = 5});
  const Stream t = idle.create_stream(0);
  const Event f = idle.create_event(0);
  void* b = idle.allocate(64, t);
  for (int i = 0; i < 20; ++i) {
    upload(idle, b, v, t);
    idle.record(f, t);
    while (!idle.query(f)) {
    }
  }
  EXPECT_GT(idle.stats().idle_polls, 0u);
}

TEST(HostRuntime, AWaitWaitsForTheRecordItSawNotALaterOne) {
  // s1's wait sees e's first record. e is then recorded again behind work
  // that needs s1 to get past its wait: waiting for the later record would
  // never finish.
  HostRuntime rt({.seed = 1});
  const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0), s2 = rt.create_stream(0);
  const Event e = rt.create_event(0), done = rt.create_event(0), g = rt.create_event(0), f = rt.create_event(0);
  void* a = rt.allocate(64, s0);
  upload(rt, a, values(16, 1), s0);
  rt.record(e, s0);
  rt.wait(s1, e);
  rt.record(done, s1);
  rt.record(g, s1);
  rt.wait(s2, g);
  rt.record(f, s2);
  rt.wait(s0, f);
  rt.record(e, s0);
  EXPECT_NO_THROW(rt.synchronize(done));
  EXPECT_NO_THROW(rt.synchronize(e));
  EXPECT_TRUE(rt.query(e));
}

TEST(HostRuntime, AWaitIsForItsRecordEvenWhenAReRecordOnAnotherStreamFinishesFirst) {
  // e is recorded behind a write on s0, s2 waits for that record, then e
  // is recorded again on s1 (which has nothing queued). Whichever record
  // finishes first, s2's copy must see the write: for every seed.
  const std::vector<float> want = values(16, 5);
  for (int seed = 1; seed <= kSeeds; ++seed) {
    HostRuntime rt({.seed = static_cast<std::uint64_t>(seed)});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0), s2 = rt.create_stream(0);
    const Event e = rt.create_event(0);
    void* a = rt.allocate(64, s0);
    void* b = rt.allocate(64, s2);
    upload(rt, a, want, s0);
    rt.record(e, s0);
    rt.wait(s2, e);
    rt.record(e, s1);
    rt.copy(b, a, 64, s2);
    EXPECT_EQ(download(rt, b, 16, s2), want) << "seed " << seed;
  }
}

TEST(HostRuntime, FreshMemoryHoldsAPatternAndAllocationsAreAligned) {
  HostRuntime rt({});
  const Stream s = rt.create_stream(0);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{255}, std::size_t{4096}}) {
    void* p = rt.allocate(bytes, s);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
    EXPECT_TRUE(rt.in_arena(p));
    EXPECT_EQ(rt.device_of(p), 0);
    std::vector<std::uint8_t> got(bytes);
    rt.copy(got.data(), p, bytes, s);
    EXPECT_EQ(got, std::vector<std::uint8_t>(bytes, 0xCB));
    rt.free(p, s);
  }
  rt.drain();
  EXPECT_EQ(rt.stats().live_allocations, 0u);
  int host = 0;
  EXPECT_EQ(rt.device_of(&host), -1);
}

TEST(HostRuntimeDeathTest, AHostReadOfDeviceMemoryDiesNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        HostRuntime rt({});
        void* p = rt.allocate(64, rt.create_stream(0));
        volatile float x = *static_cast<volatile float*>(p);  // a core path that forgot the memory space
        (void)x;
      },
      "host runtime: a host read of device memory at 0x[0-9a-f]+ \\(arena offset [0-9]+\\) outside the runtime");
  EXPECT_DEATH(
      {
        HostRuntime rt({});
        void* p = rt.allocate(64, rt.create_stream(0));
        *static_cast<volatile float*>(p) = 1.0f;
      },
      "host runtime: a host write to device memory at 0x[0-9a-f]+");
}

TEST(HostRuntimeDeathTest, AFaultOutsideTheArenaIsLeftToTheDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        HostRuntime rt({});
        volatile int* null = nullptr;
        (void)*null;
      },
      testing::KilledBySignal(SIGSEGV), "");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HostRuntime, KernelsRefuseHostMemoryAndPeerMemoryWithoutAccess) {
  HostRuntime rt({.devices = 2});
  const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(1);
  void* a = rt.allocate(64, s0);
  void* b = rt.allocate(64, s1);
  EXPECT_EQ(rt.device_of(b), 1);
  std::vector<float> host(16);
  EXPECT_NE(error_of([&] { rt.reduce(a, host.data(), 16, DType::kFloat32, ReduceOp::kSum, s0); })
                .find("is host memory; kernels touch device memory only"),
            std::string::npos);
  EXPECT_NE(error_of([&] { rt.reduce(a, b, 16, DType::kFloat32, ReduceOp::kSum, s0); })
                .find("is memory of device 1, which kernels on device 0 may not touch (enable_peer_access(0, 1)"),
            std::string::npos);
  EXPECT_TRUE(rt.can_access_peer(0, 1));
  rt.enable_peer_access(0, 1);
  rt.reduce(a, b, 16, DType::kFloat32, ReduceOp::kSum, s0);
  rt.copy(a, b, 64, s0);  // copies move between devices without peer access
  HostRuntime none({.devices = 2, .peer_access = false});
  EXPECT_FALSE(none.can_access_peer(0, 1));
  EXPECT_NE(error_of([&] { none.enable_peer_access(0, 1); }).find("can_access_peer is false"), std::string::npos);
}

TEST(HostRuntime, EventsAreRecordedOnTheirOwnDevicesStreams) {
  HostRuntime rt({.devices = 2});
  const Stream s1 = rt.create_stream(1);
  const Event e = rt.create_event(0);
  EXPECT_NE(error_of([&] { rt.record(e, s1); }).find("an event is recorded on streams of its own device only"),
            std::string::npos);
}

TEST(HostRuntime, OperandsMustLieInsideALiveAllocation) {
  HostRuntime rt({});
  const Stream s = rt.create_stream(0);
  auto* a = static_cast<std::byte*>(rt.allocate(256, s));
  std::vector<std::byte> host(512);
  EXPECT_NE(error_of([&] { rt.copy(a + 128, host.data(), 256, s); }).find("runs past the end of allocation"),
            std::string::npos);
  rt.free(a, s);
  EXPECT_NE(error_of([&] { rt.copy(a, host.data(), 16, s); }).find("whose free() is already queued"), std::string::npos);
  rt.drain();
  EXPECT_NE(error_of([&] { rt.copy(a, host.data(), 16, s); }).find("not allocated (freed, or never allocated)"),
            std::string::npos);
}

TEST(HostRuntime, AFreeOrderedBeforeItsReaderIsAUseAfterFreeNamedForSomeSeed) {
  int caught = 0;
  for (int seed = 1; seed <= kSeeds && !caught; ++seed) {
    HostRuntime rt({.seed = static_cast<std::uint64_t>(seed)});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0);
    void* a = rt.allocate(64, s0);
    void* b = rt.allocate(64, s1);
    rt.copy(b, a, 64, s1);
    rt.free(a, s0);  // not ordered after s1's read
    const std::string e = error_of([&] { rt.drain(); });
    if (e == "no error") continue;
    EXPECT_NE(e.find("copy #1 reads"), std::string::npos) << e;
    EXPECT_NE(e.find("was freed before this operation ran"), std::string::npos) << e;
    EXPECT_EQ(error_of([&] { (void)rt.query(rt.create_event(0)); }), e) << "a failed runtime stays failed";
    caught = seed;
  }
  EXPECT_GT(caught, 0);
}

TEST(HostRuntime, ADoubleFreeIsReportedByTheNextCall) {
  HostRuntime rt({});
  const Stream s = rt.create_stream(0);
  void* a = rt.allocate(64, s);
  rt.free(a, s);
  rt.free(a, s);
  EXPECT_NE(error_of([&] { rt.drain(); }).find("not a live allocation of this runtime (freed twice"),
            std::string::npos);
}

// Random bits of every dtype, special values included.
std::vector<std::byte> random_bytes(DType dt, std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> out(n * dtype_size(dt));
  for (auto& b : out) b = static_cast<std::byte>(rng());
  if (dt == DType::kBool)
    for (auto& b : out) b &= std::byte{1};
  return out;
}

TEST(HostRuntime, ReductionsAndAveragesGiveTheHostReferencesBits) {
  std::mt19937_64 rng(11);
  HostRuntime rt({.seed = 9});
  const Stream s = rt.create_stream(0);
  constexpr std::size_t kN = 1000;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dt = static_cast<DType>(d);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduce_op_unsupported(op, dt)) continue;
      const auto a = random_bytes(dt, kN, rng), b = random_bytes(dt, kN, rng);
      auto want = a;
      reduce_host(want.data(), b.data(), kN, dt, op);
      if (op == ReduceOp::kAvg) finish_average_host(want.data(), kN, dt, 3);
      void* da = rt.allocate(a.size(), s);
      void* db = rt.allocate(b.size(), s);
      rt.copy(da, a.data(), a.size(), s);
      rt.copy(db, b.data(), b.size(), s);
      rt.reduce(da, db, kN, dt, op, s);
      if (op == ReduceOp::kAvg) rt.finish_average(da, kN, dt, 3, s);
      std::vector<std::byte> got(a.size());
      rt.copy(got.data(), da, got.size(), s);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(dt) << " " << reduce_op_name(op);
      rt.free(da, s);
      rt.free(db, s);
    }
  }
}

// The contract every runtime passes, on two simulated devices, three seeds.
contract::RuntimeFactory host_factory(std::uint64_t seed) {
  return {"seed" + std::to_string(seed), [seed](std::string*) -> std::unique_ptr<DeviceRuntime> {
            return std::make_unique<HostRuntime>(HostRuntimeOptions{.seed = seed, .devices = 2});
          }};
}
INSTANTIATE_TEST_SUITE_P(Host, RuntimeContract, testing::Values(host_factory(1), host_factory(2), host_factory(3)),
                         [](const auto& p) { return p.param.label; });

// ---- the broken variants, each doing its one wrong thing ---------------------

TEST(HostRuntimeBugs, NamesRoundTrip) {
  for (int b = 0; b < kNumHostRuntimeBugs; ++b) {
    const auto bug = static_cast<HostRuntimeBug>(b);
    EXPECT_EQ(parse_host_runtime_bug(host_runtime_bug_name(bug)), bug);
  }
  EXPECT_FALSE(parse_host_runtime_bug("nope"));
  EXPECT_EQ(HostRuntime({.bug = HostRuntimeBug::kEarlyEvent}).name(), "host:early_event");
  EXPECT_EQ(HostRuntime({}).name(), "host");
}

TEST(HostRuntimeBugs, EarlyEventCompletesBeforeItsWork) {
  HostRuntime rt({.bug = HostRuntimeBug::kEarlyEvent});
  const Stream s = rt.create_stream(0);
  void* a = rt.allocate(64, s);
  const Event e = rt.create_event(0);
  upload(rt, a, values(16, 1), s);
  rt.record(e, s);
  rt.synchronize(e);  // returns at once: the event is complete already
  EXPECT_EQ(rt.stats().executed, 0u);
  // A copy to the host waits for an event too: it reads the fresh bytes.
  std::vector<std::uint8_t> got(64);
  rt.copy(got.data(), a, 64, s);
  EXPECT_EQ(got, std::vector<std::uint8_t>(64, 0xCB));
}

TEST(HostRuntimeBugs, WrongStreamCopyLeavesAKernelOnTheGivenStreamUnorderedForSomeSeed) {
  const std::vector<float> ones(16, 1.0f);
  auto scenario = [&](std::uint64_t seed, bool broken) {
    HostRuntime rt({.seed = seed, .bug = broken ? HostRuntimeBug::kWrongStreamCopy : HostRuntimeBug::kNone});
    const Stream s0 = rt.create_stream(0);
    (void)rt.create_stream(0);  // where the broken runtime puts s0's copies
    void* src = rt.allocate(64, s0);
    void* dst = rt.allocate(64, s0);
    upload(rt, dst, std::vector<float>(16, 0.0f), s0);
    upload(rt, src, ones, s0);
    rt.reduce(dst, src, 16, DType::kFloat32, ReduceOp::kSum, s0);  // one stream: in order, or so it should be
    return download(rt, dst, 16, s0);
  };
  expect_wrong_only_when_broken(scenario, ones);
}

TEST(HostRuntimeBugs, ReduceSkipsWaitRunsBeforeItsInputForSomeSeed) {
  const std::vector<float> ones = values(16, 1);
  auto scenario = [&](std::uint64_t seed, bool broken) {
    HostRuntime rt({.seed = seed, .bug = broken ? HostRuntimeBug::kReduceSkipsWait : HostRuntimeBug::kNone});
    const Stream s0 = rt.create_stream(0), s1 = rt.create_stream(0);
    void* src = rt.allocate(64, s0);
    void* dst = rt.allocate(64, s1);
    const Event e = rt.create_event(0);
    upload(rt, dst, std::vector<float>(16, 0.0f), s1);
    upload(rt, src, ones, s0);
    rt.record(e, s0);
    rt.wait(s1, e);
    rt.reduce(dst, src, 16, DType::kFloat32, ReduceOp::kSum, s1);
    return download(rt, dst, 16, s1);
  };
  expect_wrong_only_when_broken(scenario, ones);
}

TEST(HostRuntimeBugs, FreeWhileInUseReleasesUnderQueuedWorkWhichIsNamed) {
  HostRuntime rt({.bug = HostRuntimeBug::kFreeWhileInUse});
  const Stream s = rt.create_stream(0);
  void* a = rt.allocate(64, s);
  void* b = rt.allocate(64, s);
  rt.copy(b, a, 64, s);
  rt.free(a, s);  // the copy before it on the same stream has not run
  EXPECT_NE(error_of([&] { rt.drain(); }).find("was freed before this operation ran"), std::string::npos);
  HostRuntime ok({});
  const Stream t = ok.create_stream(0);
  void* c = ok.allocate(64, t);
  void* d = ok.allocate(64, t);
  ok.copy(d, c, 64, t);
  ok.free(c, t);
  EXPECT_NO_THROW(ok.drain());
}

}  // namespace
}  // namespace collie::cuda
