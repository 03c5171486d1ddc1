// SmallPool: per-thread free lists for the small objects every op allocates
// and frees (coroutine frames, Work states, engine bookkeeping nodes).
//
// Guarantees:
//   - pool_allocate(n) returns memory aligned for any fundamental type
//     (alignof(std::max_align_t)); n may be 0.
//   - pool_deallocate(p, n) must get the same n that allocated p; it may run
//     on any thread (a block freed on another thread joins that thread's
//     lists), also while threads exit.
//   - Blocks above kMaxPooledBytes go straight to ::operator new/delete. Each
//     size class keeps at most kMaxFreePerClass free blocks per thread; the
//     rest go back to the heap, so a burst of ops does not pin more than
//     that. (The bound is high enough for a simulated world of 10^5 ranks,
//     whose ranks free and make their per-op objects in waves, to trade them
//     without the heap.)
// No locks: each thread only touches its own lists.
#pragma once

#include <cstddef>
#include <new>

namespace collie {

// Size classes are this far apart: an object wastes at most 15 bytes (with
// 64, a 144-byte Work state took 192; at 10^5 simulated ranks every byte of
// their per-rank objects is a tenth of a megabyte).
inline constexpr std::size_t kPoolGranuleBytes = 16;
inline constexpr std::size_t kMaxPooledBytes = 2048;
inline constexpr std::size_t kMaxFreePerClass = 1 << 16;

void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;

// A standard allocator over the pool, for std::allocate_shared and node-based
// containers. Stateless: every instance compares equal.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "PoolAllocator serves fundamental alignments only");
    return static_cast<T*>(pool_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace collie
