#include "core/small_pool.h"

#include <atomic>
#include <cstdint>
#include <mutex>

namespace collie {
namespace {

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer every block comes from the heap, so a use after
// free of a pooled object is still reported.
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif

constexpr std::size_t kClasses = kMaxPooledBytes / kPoolGranuleBytes;
// A slab's first granule links it to the process's list of slabs.
constexpr std::size_t kSlabHeaderBytes = kPoolGranuleBytes;
static_assert(kSlabHeaderBytes >= sizeof(void*) && kSlabHeaderBytes % alignof(std::max_align_t) == 0);
static_assert(kPoolGranuleBytes % alignof(std::max_align_t) == 0);

struct FreeBlock {
  FreeBlock* next;
};

std::size_t class_of(std::size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kPoolGranuleBytes; }
std::size_t block_bytes(std::size_t c) { return (c + 1) * kPoolGranuleBytes; }

// What threads that ended left: their free blocks (in use again by the
// next thread that runs out of a class) and every slab ever made (so that
// each block stays reachable for leak checkers). Never destroyed: blocks
// may be freed while static objects are.
struct Orphans {
  std::mutex mu;
  FreeBlock* head[kClasses] = {};
  void* slabs = nullptr;
};
Orphans& orphans() {
  static Orphans* o = new Orphans;
  return *o;
}
std::atomic<bool> any_orphans{false};

// Trivially destructible, so it stays usable while the thread's other
// thread_local objects are destroyed (blocks freed then become orphans).
struct Lists {
  FreeBlock* head[kClasses];
  std::byte* bump;  // the rest of the thread's current slab: [bump, bump_end)
  std::byte* bump_end;
  bool registered;
  bool exiting;
};
thread_local Lists lists{};

// Under orphans().mu.
void orphan(FreeBlock* b, std::size_t c) {
  b->next = orphans().head[c];
  orphans().head[c] = b;
}

// The rest of the thread's slab, as free blocks of the largest classes
// that fit, each handed to `put(block, class)`.
template <typename Put>
void split_rest(Put put) {
  while (lists.bump_end - lists.bump >= static_cast<std::ptrdiff_t>(kPoolGranuleBytes)) {
    const std::size_t rest = static_cast<std::size_t>(lists.bump_end - lists.bump);
    const std::size_t c = class_of(rest < kMaxPooledBytes ? rest : kMaxPooledBytes);
    auto* b = reinterpret_cast<FreeBlock*>(lists.bump);
    lists.bump += block_bytes(c);
    put(b, c);
  }
  lists.bump = lists.bump_end = nullptr;
}

// Hands the thread's free blocks and the rest of its slab to the next
// thread that needs them when the thread exits.
struct Drain {
  ~Drain() {
    lists.exiting = true;
    std::lock_guard<std::mutex> lock(orphans().mu);
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        orphan(b, c);
      }
    }
    split_rest(orphan);
    any_orphans.store(true, std::memory_order_release);
  }
};
thread_local Drain drain;

void register_thread() {
  lists.registered = true;
  static_cast<void>(&drain);  // constructs it, so it runs at thread exit
}

// Takes the orphaned blocks of class `c`, if any.
bool adopt(std::size_t c) {
  std::lock_guard<std::mutex> lock(orphans().mu);
  FreeBlock* taken = orphans().head[c];
  if (taken) {
    orphans().head[c] = nullptr;
    FreeBlock* tail = taken;
    while (tail->next) tail = tail->next;
    tail->next = lists.head[c];
    lists.head[c] = taken;
  }
  bool more = false;
  for (std::size_t k = 0; k < kClasses && !more; ++k) more = orphans().head[k] != nullptr;
  if (!more) any_orphans.store(false, std::memory_order_relaxed);
  return taken != nullptr;
}

void* carve(std::size_t bytes) {
  if (lists.bump_end - lists.bump < static_cast<std::ptrdiff_t>(bytes)) {
    split_rest([](FreeBlock* b, std::size_t c) {
      b->next = lists.head[c];
      lists.head[c] = b;
    });
    auto* slab = static_cast<std::byte*>(::operator new(kSlabBytes));
    {
      std::lock_guard<std::mutex> lock(orphans().mu);
      *reinterpret_cast<void**>(slab) = orphans().slabs;
      orphans().slabs = slab;
    }
    lists.bump = slab + kSlabHeaderBytes;
    lists.bump_end = slab + kSlabBytes;
  }
  void* p = lists.bump;
  lists.bump += bytes;
  return p;
}

}  // namespace

void* pool_allocate(std::size_t bytes) {
  if (!kPooling || bytes > kMaxPooledBytes) return ::operator new(bytes);
  const std::size_t c = class_of(bytes);
  if (lists.exiting) return ::operator new(block_bytes(c));  // becomes an orphan when freed
  if (!lists.registered) register_thread();
  if (FreeBlock* b = lists.head[c]) {
    lists.head[c] = b->next;
    return b;
  }
  if (any_orphans.load(std::memory_order_acquire) && adopt(c)) {
    FreeBlock* b = lists.head[c];
    lists.head[c] = b->next;
    return b;
  }
  return carve(block_bytes(c));
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (!kPooling || bytes > kMaxPooledBytes) {
    ::operator delete(p);
    return;
  }
  const std::size_t c = class_of(bytes);
  auto* b = static_cast<FreeBlock*>(p);
  if (lists.exiting) {
    std::lock_guard<std::mutex> lock(orphans().mu);
    orphan(b, c);
    any_orphans.store(true, std::memory_order_release);
    return;
  }
  if (!lists.registered) register_thread();
  b->next = lists.head[c];
  lists.head[c] = b;
}

}  // namespace collie
