#include "sim/deferred_memory.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <vector>

namespace collie::sim {
namespace {

// Four "ranks" of `buffer` bytes each in one 4 KiB-aligned arena, one
// period apart, and a scratch region after them at an unaligned distance.
struct Arena {
  static constexpr std::size_t kColumnBytes = 64;
  static constexpr std::size_t kColumns = 5;  // a period of 320 bytes: not a power of two
  static constexpr std::size_t kPeriod = kColumnBytes * kColumns;
  static constexpr std::size_t kRanks = 4;
  static constexpr std::size_t kBuffer = 3 * kPeriod;  // each rank's, a whole number of periods
  static constexpr std::size_t kScratch = kBuffer + 40;
  std::vector<std::byte> storage = std::vector<std::byte>(kRanks * kBuffer + kScratch + 4096);
  std::byte* base() {
    auto p = reinterpret_cast<std::uintptr_t>(storage.data());
    return storage.data() + ((4096 - p % 4096) % 4096);
  }
  std::byte* at(std::size_t offset) { return base() + offset; }
  static constexpr std::size_t kBytes = kRanks * kBuffer + kScratch;
};

// One memory operation over the arena, as offsets.
struct MemOp {
  int kind;  // 0 copy, 1 reduce, 2 average
  std::size_t dst, src, count;
  DType dtype;
  ReduceOp op;
  int divisor;
};

void showValue(const MemOp& m, std::ostream& os) {
  os << "{kind " << m.kind << " dst " << m.dst << " src " << m.src << " count " << m.count << " dtype "
     << dtype_name(m.dtype) << " op " << reduce_op_name(m.op) << " divisor " << m.divisor << "}";
}

rc::Gen<MemOp> gen_op() {
  return rc::gen::exec([] {
    MemOp m{};
    m.kind = *rc::gen::inRange(0, 3);
    m.dtype = *rc::gen::element(DType::kFloat32, DType::kInt32, DType::kFloat64, DType::kInt8, DType::kFloat16);
    m.op = *rc::gen::element(ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct);
    if (m.dtype == DType::kInt32 || m.dtype == DType::kInt8) m.kind = m.kind == 2 ? 1 : m.kind;  // average: floats
    m.divisor = *rc::gen::inRange(1, 9);
    const std::size_t size = m.kind == 0 ? 1 : dtype_size(m.dtype);
    // Mostly a rank's buffer from another rank's at the same place (aligned),
    // sometimes anywhere (unaligned, or overlapping its own source).
    const bool aligned = *rc::gen::inRange(0, 4) != 0;
    const auto rank_d = *rc::gen::inRange<std::size_t>(0, Arena::kRanks);
    const auto rank_s = *rc::gen::inRange<std::size_t>(0, Arena::kRanks);
    const std::size_t max_elems = Arena::kBuffer / size;
    const auto first = *rc::gen::inRange<std::size_t>(0, max_elems);
    m.count = *rc::gen::inRange<std::size_t>(0, max_elems - first + 1);
    m.dst = rank_d * Arena::kBuffer + first * size;
    m.src = rank_s * Arena::kBuffer + first * size;
    if (!aligned) {
      // Anywhere, but at whole elements (the transports' contract).
      const std::size_t room = (Arena::kBytes - m.count * size) / size;
      m.src = *rc::gen::inRange<std::size_t>(0, room + 1) * size;
      if (*rc::gen::arbitrary<bool>()) m.dst = *rc::gen::inRange<std::size_t>(0, room + 1) * size;
    }
    return m;
  });
}

void issue(const MemOp& m, Arena& a, DeferredMemory* deferred) {
  std::byte* d = a.at(m.dst);
  const std::byte* s = a.at(m.src);
  const std::size_t bytes = m.kind == 0 ? m.count : m.count * dtype_size(m.dtype);  // a copy's count is bytes
  // Ops whose operands partially overlap are outside reduce_host's contract:
  // copy is memmove's, the others are left out.
  const bool overlap = s != d && s < d + bytes && d < s + bytes;
  if (m.kind != 0 && overlap) return;
  if (deferred) {
    if (m.kind == 0) deferred->copy(d, s, bytes);
    else if (m.kind == 1) deferred->reduce(d, s, m.count, m.dtype, m.op);
    else deferred->finish_average(d, m.count, m.dtype, m.divisor);
  } else {
    if (m.kind == 0) std::memmove(d, s, bytes);
    else if (m.kind == 1) reduce_host(d, s, m.count, m.dtype, m.op);
    else finish_average_host(d, m.count, m.dtype, m.divisor);
  }
}

void fill(Arena& a, std::uint64_t seed) {
  for (std::size_t i = 0; i < Arena::kBytes; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    // Small values: sums and products stay finite, floats stay exact enough to compare bit for bit.
    a.at(0)[i] = static_cast<std::byte>((seed >> 59) & 0x3);
  }
}

RC_GTEST_PROP(DeferredMemory, LeavesTheBytesThatRunningEachOperationAtOnceLeaves, ()) {
  const auto ops = *rc::gen::container<std::vector<MemOp>>(gen_op());
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  Arena now, later;
  fill(now, seed);
  fill(later, seed);
  DeferredMemory deferred(DeferredMemoryOptions{Arena::kColumnBytes, Arena::kColumns, 1 << 20});
  for (const MemOp& m : ops) {
    issue(m, now, nullptr);
    issue(m, later, &deferred);
  }
  deferred.flush();
  RC_ASSERT(std::memcmp(now.at(0), later.at(0), Arena::kBytes) == 0);
  RC_ASSERT(deferred.empty());
}

TEST(DeferredMemory, AlignedOperationsAreLoggedAndRunOnlyAtFlush) {
  Arena a;
  fill(a, 7);
  DeferredMemory d(DeferredMemoryOptions{Arena::kColumnBytes, Arena::kColumns, 1 << 20});
  std::vector<std::byte> before(a.at(0), a.at(0) + Arena::kBytes);
  d.copy(a.at(0), a.at(Arena::kBuffer), Arena::kBuffer);  // rank 0 <- rank 1, a whole period apart
  d.reduce(a.at(2 * Arena::kBuffer), a.at(3 * Arena::kBuffer), Arena::kBuffer / 4, DType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(std::memcmp(before.data(), a.at(0), Arena::kBytes), 0) << "nothing runs before the flush";
  EXPECT_EQ(d.counts().logged, 2u);
  EXPECT_EQ(d.counts().immediate, 0u);
  d.flush();
  EXPECT_EQ(std::memcmp(a.at(0), a.at(Arena::kBuffer), Arena::kBuffer), 0);
  // Two 960-byte operations in 64-byte blocks: 15 pieces each.
  EXPECT_EQ(d.counts().pieces, 30u);
}

TEST(DeferredMemory, AnUnalignedOperationRunsEverythingBeforeItThenItself) {
  Arena a;
  fill(a, 9);
  DeferredMemory d(DeferredMemoryOptions{Arena::kColumnBytes, Arena::kColumns, 1 << 20});
  d.copy(a.at(0), a.at(Arena::kBuffer), 64);
  d.copy(a.at(Arena::kRanks * Arena::kBuffer + 8), a.at(0), 64);  // scratch, 8 bytes off: not aligned
  EXPECT_EQ(d.counts().immediate, 1u);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(std::memcmp(a.at(Arena::kRanks * Arena::kBuffer + 8), a.at(Arena::kBuffer), 64), 0);
}

TEST(DeferredMemory, RetainedMemoryLivesUntilTheFlushThatNeedsIt) {
  DeferredMemory d(DeferredMemoryOptions{64, 1, 1 << 20});
  auto block = std::make_shared<std::vector<std::byte>>(128, std::byte{5});
  std::vector<std::byte> out(128);
  d.copy(out.data(), block->data(), 64);  // period 64: any two 64-aligned... or run at once; either way right
  const std::weak_ptr<std::vector<std::byte>> watch = block;
  d.retain(block, 128);
  block.reset();
  EXPECT_FALSE(watch.expired());
  d.flush();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(out[0], std::byte{5});
}

TEST(DeferredMemory, RefusesColumnsThatAreNotWholeCacheLines) {
  EXPECT_THROW(DeferredMemory(DeferredMemoryOptions{100, 4, 10}), std::invalid_argument);
  EXPECT_THROW(DeferredMemory(DeferredMemoryOptions{64, 0, 10}), std::invalid_argument);
}

}  // namespace
}  // namespace collie::sim
