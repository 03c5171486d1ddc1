#include "core/small_pool.h"

#include <cstdint>

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

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable while the thread's other
// thread_local objects are destroyed (blocks freed then go to the heap).
struct Lists {
  FreeBlock* head[kClasses];
  std::uint32_t count[kClasses];
  bool registered;
  bool exiting;
};
thread_local Lists lists{};

// Returns the thread's free blocks to the heap when the thread exits.
struct Drain {
  ~Drain() {
    lists.exiting = true;
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        ::operator delete(b);
      }
      lists.count[c] = 0;
    }
  }
};
thread_local Drain drain;

std::size_t class_of(std::size_t bytes) { return bytes == 0 ? 0 : (bytes - 1) / kPoolGranuleBytes; }

}  // namespace

void* pool_allocate(std::size_t bytes) {
  if (!kPooling || bytes > kMaxPooledBytes || lists.exiting) return ::operator new(bytes);
  const std::size_t c = class_of(bytes);
  if (FreeBlock* b = lists.head[c]) {
    lists.head[c] = b->next;
    --lists.count[c];
    return b;
  }
  return ::operator new((c + 1) * kPoolGranuleBytes);
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (!kPooling || bytes > kMaxPooledBytes) {
    ::operator delete(p);
    return;
  }
  const std::size_t c = class_of(bytes);
  if (lists.exiting || lists.count[c] >= kMaxFreePerClass) {
    ::operator delete(p);
    return;
  }
  if (!lists.registered) {
    lists.registered = true;
    static_cast<void>(&drain);  // constructs it, so it runs at thread exit
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = lists.head[c];
  lists.head[c] = b;
  ++lists.count[c];
}

}  // namespace collie
