// Pins the simulator's event order: for a fixed scenario and seed, the trace
// hash, the number of events, the frames delivered and the virtual end
// time (and, with real data, a digest of every rank's result bytes) are
// the values recorded here. Any change to the engine that reorders events
// -- the queue, the tie-break draws, how many events an op takes, when a
// rank is resumed -- fails this test, even when every result stays right.
//
// The pinned values were recorded with the engine of main at 174a2bc (before
// the simulator's rework for scale, issue #25) and must never be edited to
// make a change pass: a change that moves them changes what every seed
// replays. One deliberate change of the protocol moved them (issue #26's
// frame checks, merged at 50d6542): a CTS and a data frame now echo their
// RTS's tag, channel_seq and fingerprint, which the hash mixes, and a failed
// collective's posted operations end with the call ("crash w7 s1": 105 ->
// 85 events). Every other case kept its events, frames, end time and
// result bytes; only the hash of the header fields moved, and was re-pinned. To print the values a build computes (when adding a case):
//   COLLIE_PRINT_PINS=1 build/sim/sim_test --gtest_filter='Pinned*'
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "sim/explorer.h"
#include "sim/faults.h"
#include "sim/sim_world.h"

namespace collie::sim {
namespace {

struct Observed {
  std::uint64_t hash = 0;
  std::uint64_t events = 0;
  std::uint64_t frames = 0;
  Nanos end = 0;
  std::uint64_t data = 0;  // FNV-1a over every rank's result bytes, rank order; 0 without data
  bool operator==(const Observed&) const = default;
};

void PrintTo(const Observed& o, std::ostream* os) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "{0x%016" PRIx64 "ull, %" PRIu64 ", %" PRIu64 ", %" PRId64 ", 0x%016" PRIx64 "ull}",
                o.hash, o.events, o.frames, static_cast<std::int64_t>(o.end), o.data);
  *os << buf;
}

std::uint64_t fnv(std::uint64_t h, const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// Each rank's tensors; the program reads and writes them, the digest hashes them.
struct Data {
  std::vector<std::vector<Tensor>> per_rank;
  std::uint64_t digest() const {
    std::uint64_t h = 1469598103934665603ull;
    bool any = false;
    for (const auto& ts : per_rank)
      for (const Tensor& t : ts)
        if (t.materialized()) {
          h = fnv(h, t.data(), t.bytes());
          any = true;
        }
    return any ? h : 0;
  }
};

struct Case {
  int world = 4;
  SimOptions options;
  bool timing_only = false;
  std::vector<int> explore;  // a schedule for the explorer (empty: none)
  int runs = 1;              // run() calls on one world
};

using Program = std::function<Task<void>(Communicator&, std::vector<Tensor>&)>;
using Setup = std::function<std::vector<Tensor>(int rank, int world, bool timing_only)>;

Observed observe(const Case& k, const Setup& setup, const Program& program) {
  SimWorld w(k.world, k.options);
  w.simulator().set_timing_only(k.timing_only);
  Explorer explorer(k.explore);
  if (!k.explore.empty()) w.simulator().set_explorer(&explorer);
  Data d;
  for (int r = 0; r < k.world; ++r) d.per_rank.push_back(setup(r, k.world, k.timing_only));
  SimResult res;
  for (int i = 0; i < k.runs; ++i)
    res = w.run([&](Communicator& c) { return program(c, d.per_rank[static_cast<std::size_t>(c.rank())]); });
  return Observed{res.trace_hash, res.events, res.frames, std::max(res.end_time, res.stopped_at), d.digest()};
}

void expect_pinned(const char* name, const Observed& got, const Observed& want) {
  if (std::getenv("COLLIE_PRINT_PINS")) {
    std::printf("PIN %s ", name);
    std::ostringstream os;
    PrintTo(got, &os);
    std::printf("%s\n", os.str().c_str());
  }
  EXPECT_EQ(got, want) << name << ": the engine's event order changed (see the head of this file)";
}

struct Pin {
  const char* name;
  std::uint64_t seed;
  Observed want;
};

// `k` once per pin, with the pin's seed.
void expect_seeds(Case k, const Setup& setup, const Program& program, std::initializer_list<Pin> pins) {
  for (const Pin& p : pins) {
    k.options.seed = p.seed;
    expect_pinned(p.name, observe(k, setup, program), p.want);
  }
}

// Rank r's value at element i: small integers, exact in float32 sums.
void fill(Tensor& t, int r, int salt) {
  for (std::size_t i = 0; i < t.count(); ++i)
    t.set(i, static_cast<double>((static_cast<std::size_t>(r) * 7 + i * 3 + static_cast<std::size_t>(salt)) % 13));
}

Tensor make(DType dt, std::size_t n, bool timing_only) {
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(n)};
  return timing_only ? Tensor::phantom(dt, shape) : Tensor(dt, shape);
}

// One all_reduce of `count` float32 per rank with `a`, `iters` times.
Observed all_reduce_case(Case k, std::size_t count, Algorithm a, int iters, ReduceOp op = ReduceOp::kSum) {
  return observe(
      k,
      [count](int r, int, bool to) {
        std::vector<Tensor> v;
        v.push_back(make(DType::kFloat32, count, to));
        if (!to) fill(v[0], r, 0);
        return v;
      },
      [a, iters, op](Communicator& c, std::vector<Tensor>& t) -> Task<void> {
        for (int i = 0; i < iters; ++i) co_await c.all_reduce(t[0], op, {}, {a});
      });
}

TEST(PinnedTraces, AllReduceRealData) {
  Case k;
  k.world = 6;
  k.options.seed = 1;
  expect_pinned("ring w6 s1", all_reduce_case(k, 1 << 18, Algorithm::kRing, 2),
      {0x50c8a6d9ebb88ff2ull, 564, 360, 276158, 0x510024e9e2c7b33bull});
  k.options.seed = 9;
  expect_pinned("ring w6 s9", all_reduce_case(k, 1 << 18, Algorithm::kRing, 2),
      {0x14f288dc46d5e508ull, 563, 360, 276202, 0x510024e9e2c7b33bull});
  k.world = 7;
  expect_pinned("rd w7 s9 avg", all_reduce_case(k, 1000, Algorithm::kRecursiveDoubling, 3, ReduceOp::kAvg),
      {0x7bc3ecb3cdef51b3ull, 223, 42, 10855, 0xd4e9e33940d289b8ull});
  k.world = 12;
  k.options.seed = 3;
  expect_pinned("hd w12 s3", all_reduce_case(k, 1 << 16, Algorithm::kHalvingDoubling, 2),
      {0x2bd4201abecb1f8bull, 567, 208, 274040, 0x9cf3e3c7e20e50a3ull});
  k.world = 64;
  k.options.seed = 1;
  k.options.network.ranks_per_node = 1;
  k.options.network.inter = LinkModel{5.0, 12.5};
  k.options.network.jitter_fraction = 0.0;
  expect_pinned("auto w64 1MiB (bench/sim_allreduce's platform)", all_reduce_case(k, 1 << 18, Algorithm::kAuto, 3),
                {0x55939cfa6e80729aull, 11397, 4608, 1165113, 0x63c0476999d26f83ull});
}

TEST(PinnedTraces, AllReduceTimingOnlyAtScale) {
  Case k;
  k.timing_only = true;
  k.options.network.ranks_per_node = 8;
  k.world = 2048;  // 64 MiB per rank: halving-doubling
  k.options.seed = 1;
  expect_pinned("hd w2048 s1 timing", all_reduce_case(k, 1 << 24, Algorithm::kAuto, 1),
      {0x159ceb8ee7a5ea33ull, 233091, 118784, 23024167, 0x0000000000000000ull});
  k.world = 3000;  // not a power of two: folds
  k.options.seed = 5;
  expect_pinned("hd w3000 s5 timing", all_reduce_case(k, 1 << 24, Algorithm::kAuto, 1),
      {0xe636f707c896140full, 244449, 124496, 37765138, 0x0000000000000000ull});
  k.world = 96;  // ring, segmented, rendezvous
  k.options.seed = 2;
  expect_pinned("ring w96 s2 timing", all_reduce_case(k, 1 << 24, Algorithm::kAuto, 1),
      {0xc726ecc03ac3912cull, 239850, 164160, 12440884, 0x0000000000000000ull});
}

// Every collective and algorithm, on the world and on a group, at a world
// that is not a power of two.
std::vector<Tensor> mix_setup(int r, int n, bool timing_only) {
  std::vector<Tensor> v;
  const std::size_t big = 40000, small = 300;
  for (std::size_t s : {big, small, big * static_cast<std::size_t>(n), small * static_cast<std::size_t>(n),
                        small * static_cast<std::size_t>(n)})
    v.push_back(make(DType::kFloat32, s, timing_only));
  for (int i = 0; i < n; ++i) v.push_back(make(DType::kFloat32, small, timing_only));
  if (!timing_only)
    for (std::size_t i = 0; i < v.size(); ++i) fill(v[i], r, static_cast<int>(i));
  return v;
}

Task<void> mix_program(Communicator& c, std::vector<Tensor>& t) {
  const int n = c.world_size();
  std::vector<TensorView> list;
  for (int i = 0; i < n; ++i) list.push_back(t[5 + static_cast<std::size_t>(i)]);
  std::vector<TensorView> none;
  const auto& root_list = [&](int root) -> std::span<const TensorView> {
    return c.rank() == root ? std::span<const TensorView>(list) : std::span<const TensorView>(none);
  };
  co_await c.broadcast(t[0], 1, {}, {Algorithm::kBinomialTree});
  co_await c.broadcast(t[1], 2, {}, {Algorithm::kLinear});
  co_await c.reduce(t[0], 0, ReduceOp::kMax, {}, {Algorithm::kBinomialTree});
  co_await c.reduce(t[1], 3, ReduceOp::kSum, {}, {Algorithm::kLinear});
  co_await c.scatter(t[1], 1, root_list(1), {}, {Algorithm::kBinomialTree});
  co_await c.gather(t[1], 2, root_list(2), {}, {Algorithm::kLinear});
  co_await c.all_gather(list, t[1], {}, {Algorithm::kRing});
  co_await c.all_gather(list, t[1], {}, {Algorithm::kBruck});
  co_await c.all_gather_into_tensor(t[3], t[1]);
  co_await c.reduce_scatter(t[1], list, ReduceOp::kSum, {}, {Algorithm::kPairwise});
  co_await c.reduce_scatter_tensor(t[0], t[2], ReduceOp::kMin, {}, {Algorithm::kRing});
  co_await c.all_to_all_single(t[4], t[3], {}, {}, {}, {Algorithm::kBruck});
  co_await c.all_to_all_single(t[3], t[4], {}, {}, {}, {Algorithm::kPairwise});
  co_await c.barrier();
  Group odd = c.new_group({1, 3, n - 1});
  if (c.rank_in(odd) >= 0) {
    co_await c.all_reduce(t[0], ReduceOp::kSum, odd);
    co_await c.broadcast(t[1], 3, odd);
    co_await c.barrier(odd);
  }
  co_await c.all_reduce(t[1], ReduceOp::kProduct, {}, {Algorithm::kRecursiveDoubling});
}

TEST(PinnedTraces, EveryCollective) {
  Case k;
  k.world = 7;
  expect_seeds(k, mix_setup, mix_program,
               {{"mix w7 s1", 1, {0x91704af652f38828ull, 1287, 442, 268764, 0x95222cf4bc07c4beull}},
                {"mix w7 s4", 4, {0x5d0b9045797db990ull, 1296, 442, 262619, 0x95222cf4bc07c4beull}}});
  k.timing_only = true;
  k.options.seed = 2;
  expect_pinned("mix w7 s2 timing", observe(k, mix_setup, mix_program),
      {0xa07927cd7ea00d03ull, 1290, 442, 265592, 0x0000000000000000ull});
  // The same world runs twice (state carried between runs).
  k.timing_only = false;
  k.runs = 2;
  expect_pinned("mix w7 s2 twice", observe(k, mix_setup, mix_program),
      {0x5b0f5013d032fc75ull, 2587, 884, 531238, 0x95222cf4bc07c4beull});
}

// Point-to-point: any-source races, tags, eager and rendezvous, self-sends.
std::vector<Tensor> p2p_setup(int r, int, bool timing_only) {
  std::vector<Tensor> v;
  for (std::size_t s : {std::size_t{16}, std::size_t{100000}, std::size_t{16}, std::size_t{100000}})
    v.push_back(make(DType::kFloat32, s, timing_only));
  if (!timing_only)
    for (std::size_t i = 0; i < v.size(); ++i) fill(v[i], r, static_cast<int>(i));
  return v;
}

Task<void> p2p_program(Communicator& c, std::vector<Tensor>& t) {
  const int n = c.world_size(), me = c.rank();
  if (me == 0) {
    for (int i = 1; i < n; ++i) {
      Work w = c.recv(t[0], kAnySource, 5);
      co_await w;
      co_await c.send(t[1], w.source_rank(), 6);
    }
  } else {
    co_await c.send(t[0], 0, 5);
    co_await c.recv(t[1], 0, 6);
  }
  // A ring of non-blocking exchanges, both sizes, and a self-send.
  std::vector<Work> w;
  w.push_back(c.irecv(t[2], (me + n - 1) % n, 1));
  w.push_back(c.irecv(t[3], (me + n - 1) % n, 2));
  w.push_back(c.isend(t[1], (me + 1) % n, 2));
  w.push_back(c.isend(t[0], (me + 1) % n, 1));
  Tensor self(t[0].dtype(), {static_cast<std::int64_t>(t[0].count())});
  if (t[0].materialized()) {
    w.push_back(c.irecv(self, me, 9));
    w.push_back(c.isend(t[0], me, 9));
  }
  co_await wait_all(w);
}

TEST(PinnedTraces, PointToPoint) {
  Case k;
  k.world = 5;
  expect_seeds(k, p2p_setup, p2p_program,
               {{"p2p w5 s1", 1, {0x9be9927e0ebe3660ull, 73, 36, 48413, 0xa5655cadba461683ull}},
                {"p2p w5 s2", 2, {0x88085ca4416b008eull, 74, 36, 56334, 0x6214234a95cd2ca3ull}},
                {"p2p w5 s3", 3, {0x8ed4dc6aad78c4d6ull, 74, 36, 48453, 0x180e8771fe5ce763ull}}});
  k.options.seed = 3;
  k.explore = {1, 2, 0, 1};
  expect_pinned("p2p w5 explored", observe(k, p2p_setup, p2p_program),
      {0x5f248c93dc9905edull, 73, 36, 0, 0x6214234a95cd2ca3ull});
}

TEST(PinnedTraces, CpuBoundModel) {
  Case k;
  k.world = 6;
  k.options.seed = 3;
  NetworkModel& m = k.options.network;
  m.cpu_bound = true;
  m.overhead_us = 4.5;
  m.cores_per_node = 2;
  m.ranks_per_node = 3;
  m.oversubscribed_overhead_us = 1.5;
  m.oversubscribed_cpu_factor = 1.2;
  m.cache_bytes = 1 << 20;
  m.memory_bandwidth_GBps = 3.0;
  m.memory_reduce_GBps = 8.0;
  expect_pinned("cpu-bound w6 s3", observe(k, mix_setup, mix_program),
      {0x6beb1bd83da8da55ull, 1052, 344, 2484438, 0xa0b3547861c38218ull});
  expect_pinned("cpu-bound ring w6 s3", all_reduce_case(k, 1 << 20, Algorithm::kRing, 1),
      {0xb8f6552945aa2f0dull, 809, 540, 8336482, 0x42ec93391f49b09bull});
}

TEST(PinnedTraces, Faults) {
  Case k;
  k.world = 7;
  auto with_plan = [&](std::uint64_t seed, bool destructive) {
    k.options.seed = seed;
    k.options.faults = random_fault_plan(seed, k.world, destructive);
    k.options.default_timeout_ns = destructive ? 2'000'000 : 0;
    return observe(k, mix_setup, mix_program);
  };
  expect_pinned("benign faults w7 s3", with_plan(3, false),
      {0x318c3f6e6a3fba03ull, 1272, 442, 1170217, 0x95222cf4bc07c4beull});
  expect_pinned("benign faults w7 s8", with_plan(8, false),
      {0x257f0daf74db7000ull, 1297, 442, 363448, 0x95222cf4bc07c4beull});
  expect_pinned("destructive faults w7 s5", with_plan(5, true),
      {0x0210699d75ce42dcull, 1296, 442, 1297176, 0x95222cf4bc07c4beull});
  expect_pinned("destructive faults w7 s6", with_plan(6, true),
      {0x4458e8753b1eba0cull, 502, 141, 2088213, 0x5329203bd538bf9aull});
  k.options.seed = 1;
  k.options.faults = {};
  k.options.default_timeout_ns = 0;
  ASSERT_FALSE(parse_fault("crash:rank=2,op=3,detect_us=20", k.options.faults));
  ASSERT_FALSE(parse_fault("duplicate:p=0.2", k.options.faults));
  expect_pinned("crash w7 s1", observe(k, mix_setup, mix_program),
      {0x6a30fe574bc0ae38ull, 85, 32, 28105, 0xd97029dc7f459310ull});
  // A deadlock: rank 1 waits for a tag nobody sends, until its timeout.
  k.options.faults = {};
  k.options.default_timeout_ns = 50'000;
  expect_pinned("timeout w5 s1", observe(k, p2p_setup,
                                         [](Communicator& c, std::vector<Tensor>& t) -> Task<void> {
                                           if (c.rank() == 1) co_await c.recv(t[0], 0, 77);
                                           co_await c.barrier();
                                         }),
                {0x82ffe097fb12367cull, 77, 14, 50000, 0x420a0ffc03e9256aull});
}

}  // namespace
}  // namespace collie::sim
