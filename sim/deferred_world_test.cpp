// A world with deferred memory (Simulator::defer_memory) leaves every
// rank's memory as a world that runs each memory operation at once does,
// with the same virtual times: collectives of each algorithm, eager and
// rendezvous sizes, odd counts, and an eager payload whose sender
// overwrites it before it is delivered.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "sim/faults.h"
#include "sim/sim_world.h"

namespace collie::sim {
namespace {

// Each rank's region of one arena: kRegion bytes, holding tensors at the
// same offsets in every rank (so that what moves between ranks lies a
// whole number of regions apart: one period of the log).
constexpr std::size_t kRegion = 64 * 1024;
constexpr std::size_t kColumn = 1024;
struct Layout {
  static constexpr std::size_t kAllReduce = 0;        // 1,001 floats
  static constexpr std::size_t kGatherIn = 8192;      // 37 floats
  static constexpr std::size_t kGatherOut = 12288;    // world x 37 floats
  static constexpr std::size_t kToAllIn = 20480;      // world x 29 int32
  static constexpr std::size_t kToAllOut = 24576;     // world x 29 int32
  static constexpr std::size_t kLarge = 28672;        // 3,001 floats: past the eager threshold
  static constexpr std::size_t kP2p = 49152;          // 5 floats, sent eagerly then overwritten
  static constexpr std::size_t kP2pIn = 49408;        // 5 floats
};

struct Outcome {
  bool ok = false;
  std::string report;
  std::vector<std::byte> memory;
  std::uint64_t trace_hash = 0;
  Nanos end_time = 0;
  DeferredMemory::Counts counts;
};

Outcome run_world(int world, Algorithm algorithm, bool deferred, const std::vector<std::string>& faults = {}) {
  SimOptions o;
  for (const std::string& f : faults) EXPECT_FALSE(parse_fault(f, o.faults)) << f;
  o.seed = 3;
  o.force_algorithm = algorithm;
  o.network.eager_threshold_bytes = 4096;
  if (deferred) o.deferred_memory = DeferredMemoryOptions{kColumn, kRegion / kColumn, 1 << 20};
  const MemorySpace space = deferred ? MemorySpace::kDevice : MemorySpace::kHost;
  Outcome out;
  out.memory.resize(kRegion * static_cast<std::size_t>(world));
  for (std::size_t i = 0; i < out.memory.size() / 4; ++i) {
    const float v = static_cast<float>((i * 7 + 3) % 13);
    std::memcpy(out.memory.data() + 4 * i, &v, 4);
  }
  std::byte* base = out.memory.data();
  auto view = [&](int rank, std::size_t offset, std::size_t count, DType dtype = DType::kFloat32) {
    return TensorView{base + kRegion * static_cast<std::size_t>(rank) + offset, dtype, count, space};
  };
  SimWorld w(world, o);
  const SimResult res = w.run([&](Communicator& c) -> Task<void> {
    const int r = c.rank();
    const int n = c.world_size();
    {
      Work a = c.all_reduce(view(r, Layout::kAllReduce, 1001));
      co_await a;
    }
    {
      Work a = c.all_reduce(view(r, Layout::kLarge, 3001), ReduceOp::kMax);
      co_await a;
    }
    {
      Work b = c.broadcast(view(r, Layout::kLarge, 3001), n - 1);
      co_await b;
    }
    {
      Work g = c.all_gather_into_tensor(view(r, Layout::kGatherOut, 37 * static_cast<std::size_t>(n)),
                                        view(r, Layout::kGatherIn, 37));
      co_await g;
    }
    {
      Work s = c.reduce_scatter_tensor(view(r, Layout::kGatherIn, 37),
                                       view(r, Layout::kGatherOut, 37 * static_cast<std::size_t>(n)));
      co_await s;
    }
    {
      Work t = c.all_to_all_single(view(r, Layout::kToAllOut, 29 * static_cast<std::size_t>(n), DType::kInt32),
                                   view(r, Layout::kToAllIn, 29 * static_cast<std::size_t>(n), DType::kInt32));
      co_await t;
    }
    // Rank 0 sends 5 floats eagerly to rank 1, then overwrites them (an
    // all_reduce into the same bytes) before rank 1 asks for them: rank 1
    // must get what was there when the send was posted.
    if (r == 0) {
      Work s = c.isend(view(0, Layout::kP2p, 5), 1, 9);
      Work a = c.all_reduce(view(0, Layout::kP2p, 5));
      co_await a;
      co_await s;
    } else {
      Work a = c.all_reduce(view(r, Layout::kP2p, 5));
      co_await a;
      if (r == 1) {
        Work rv = c.recv(view(1, Layout::kP2pIn, 5), 0, 9);
        co_await rv;
      }
    }
  });
  if (faults.empty()) {
    EXPECT_TRUE(res.ok()) << res.describe();
  }
  out.ok = res.ok();
  out.report = res.describe();
  out.trace_hash = res.trace_hash;
  out.end_time = res.end_time;
  if (const DeferredMemory* d = w.simulator().deferred_memory()) out.counts = d->counts();
  return out;
}

void expect_same(int world, Algorithm algorithm, const std::vector<std::string>& faults = {}) {
  const Outcome now = run_world(world, algorithm, false, faults);
  const Outcome later = run_world(world, algorithm, true, faults);
  EXPECT_EQ(later.ok, now.ok);
  EXPECT_EQ(later.report, now.report);
  EXPECT_EQ(later.trace_hash, now.trace_hash);
  EXPECT_EQ(later.end_time, now.end_time);
  ASSERT_EQ(later.memory.size(), now.memory.size());
  for (int r = 0; r < world; ++r) {
    const std::size_t at = kRegion * static_cast<std::size_t>(r);
    EXPECT_EQ(std::memcmp(later.memory.data() + at, now.memory.data() + at, kRegion), 0)
        << "rank " << r << "'s memory differs (world " << world << ")";
  }
  EXPECT_GT(later.counts.logged, 0u) << "the deferred world logged nothing: the comparison proves nothing";
}

TEST(DeferredWorld, LeavesMemoryAndTimesAsRunningAtOnceDoesWithEveryAllReduceAlgorithm) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    SCOPED_TRACE(static_cast<int>(a));
    expect_same(8, a);
    expect_same(6, a);  // not a power of two
  }
}

TEST(DeferredWorld, DelayedReorderedAndDuplicatedFramesLeaveTheSameMemoryAndReport) {
  // Late eager payloads are more often overwritten before they arrive; a
  // duplicate carries its own copy of the bytes as they were at the post.
  expect_same(8, Algorithm::kAuto, {"delay:p=0.5,us=40"});
  expect_same(6, Algorithm::kRing, {"reorder:p=0.3,max_us=25"});
  expect_same(8, Algorithm::kHalvingDoubling, {"duplicate:src=3,nth=4"});
  EXPECT_FALSE(run_world(8, Algorithm::kHalvingDoubling, true, {"duplicate:src=3,nth=4"}).ok)
      << "the duplicate fault never fired";
}

TEST(DeferredWorld, AnEagerPayloadOverwrittenBeforeItsDeliveryArrivesAsItWasSent) {
  const Outcome later = run_world(4, Algorithm::kAuto, true);
  float got[5], sent[5];
  std::memcpy(got, later.memory.data() + kRegion + Layout::kP2pIn, sizeof got);
  // Rank 0's five floats as the test filled them, before the all_reduce.
  for (std::size_t k = 0; k < 5; ++k) sent[k] = static_cast<float>(((Layout::kP2p / 4 + k) * 7 + 3) % 13);
  EXPECT_EQ(std::memcmp(got, sent, sizeof got), 0) << got[0] << " " << sent[0];
}

}  // namespace
}  // namespace collie::sim
