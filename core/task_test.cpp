// The coroutine plumbing under every op: the SmallPool that serves frames and
// Work states, and the SpawnRegistry that owns background coroutines.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "core/small_pool.h"
#include "core/task.h"

namespace collie {
namespace {

TEST(SmallPool, ReusesAFreedBlockOfTheSameSizeClass) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "pooling is off under AddressSanitizer (every block comes from the heap)";
#endif
  void* a = pool_allocate(100);
  pool_deallocate(a, 100);
  void* b = pool_allocate(110);  // same 16-byte class as 100 (97..112)
  EXPECT_EQ(a, b);
  pool_deallocate(b, 110);
}

TEST(SmallPool, BlocksAreAlignedDistinctAndWholeAcrossSizes) {
  std::vector<std::pair<unsigned char*, std::size_t>> blocks;
  for (std::size_t n : {0, 1, 63, 64, 65, 500, 2048, 2049, 100000}) {
    for (int k = 0; k < 3; ++k) {
      auto* p = static_cast<unsigned char*>(pool_allocate(n));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u) << n;
      std::memset(p, static_cast<int>(blocks.size() & 0xff), n);
      blocks.emplace_back(p, n);
    }
  }
  std::set<unsigned char*> distinct;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    distinct.insert(blocks[i].first);
    for (std::size_t j = 0; j < blocks[i].second; ++j)
      ASSERT_EQ(blocks[i].first[j], static_cast<unsigned char>(i & 0xff)) << "block " << i << " overwritten";
  }
  EXPECT_EQ(distinct.size(), blocks.size());
  for (auto [p, n] : blocks) pool_deallocate(p, n);
}

// A block freed on another thread: backends/tcp/tcp_test.cpp (the core and
// the simulator own no threads; the in-process TCP world runs one per rank).

TEST(SmallPool, PoolAllocatorServesSharedPointersAndContainers) {
  auto s = std::allocate_shared<std::vector<int>>(PoolAllocator<std::vector<int>>{}, 5, 7);
  EXPECT_EQ(s->size(), 5u);
  std::vector<int, PoolAllocator<int>> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);  // grows past the pooled sizes
  EXPECT_EQ(v[999], 999);
}

struct Gate {
  std::coroutine_handle<> waiter;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { waiter = h; }
  void await_resume() const noexcept {}
};

struct Flag {
  bool* destroyed;
  ~Flag() { *destroyed = true; }
};

Spawned waits_at(Gate& g, bool* finished, bool* destroyed) {
  Flag f{destroyed};
  co_await g;
  *finished = true;
}

TEST(SpawnRegistry, CountsLiveFramesAndFreesThemWhenTheyFinish) {
  SpawnRegistry r;
  Gate a, b;
  bool fa = false, fb = false, da = false, db = false;
  r.spawn(waits_at(a, &fa, &da));
  r.spawn(waits_at(b, &fb, &db));
  EXPECT_EQ(r.live(), 2u);
  a.waiter.resume();  // finishes: the frame unlinks itself and is freed
  EXPECT_TRUE(fa);
  EXPECT_TRUE(da);
  EXPECT_EQ(r.live(), 1u);
  b.waiter.resume();
  EXPECT_TRUE(db);
  EXPECT_EQ(r.live(), 0u);
}

TEST(SpawnRegistry, DestroysFramesStillSuspendedWhenItGoes) {
  Gate g[3];
  bool finished[3] = {}, destroyed[3] = {};
  {
    SpawnRegistry r;
    for (int i = 0; i < 3; ++i) r.spawn(waits_at(g[i], &finished[i], &destroyed[i]));
    g[1].waiter.resume();  // the middle one of the list finishes first
    EXPECT_EQ(r.live(), 2u);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(destroyed[i]) << i;
    EXPECT_EQ(finished[i], i == 1) << i;
  }
}

}  // namespace
}  // namespace collie
