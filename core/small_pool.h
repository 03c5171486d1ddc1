// SmallPool: per-thread free lists for the small objects every op allocates
// and frees (coroutine frames, Work states, engine bookkeeping nodes).
//
// Guarantees:
//   - pool_allocate(n) returns memory aligned for any fundamental type
//     (alignof(std::max_align_t)); n may be 0.
//   - pool_deallocate(p, n) must get the same n that allocated p; it may run
//     on any thread (a block freed on another thread joins that thread's
//     lists), also while threads exit.
//   - Blocks above kMaxPooledBytes go straight to ::operator new/delete.
//     Smaller ones are cut from slabs of kSlabBytes, one after another, with
//     no per-block header (a heap block costs its size plus 8-16 bytes: at
//     10^5 simulated ranks with a dozen pooled objects each, that was ~25
//     MB), and are never given back to the heap: a freed block waits on its
//     thread's list for the next block of its class. The pool holds its
//     high-water mark, as the heap mostly does.
//   - When a thread exits, its free blocks and the rest of its slab go to
//     the next thread that runs out of a class: a process that starts and
//     ends threads reuses them instead of growing.
// No locks on the way of a block: each thread only touches its own lists
// (a lock only when a thread takes a new slab, exits, or adopts what an
// exited thread left).
#pragma once

#include <cstddef>
#include <new>

namespace collie {

// Size classes are this far apart: an object wastes at most 15 bytes (with
// 64, a 144-byte Work state took 192; at 10^5 simulated ranks every byte of
// their per-rank objects is a tenth of a megabyte).
inline constexpr std::size_t kPoolGranuleBytes = 16;
inline constexpr std::size_t kMaxPooledBytes = 2048;
inline constexpr std::size_t kSlabBytes = std::size_t{64} << 10;

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
