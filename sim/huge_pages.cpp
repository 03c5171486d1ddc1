#include "sim/huge_pages.h"

#include <cstdint>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define COLLIE_HEAP_HUGE_PAGES 1
#endif

namespace collie::sim {

#ifdef COLLIE_HEAP_HUGE_PAGES

namespace {
constexpr std::uintptr_t kPage = 4096;
constexpr int kGlibcDefaultTopPad = 128 * 1024;  // glibc's DEFAULT_TOP_PAD
char* heap_end() { return static_cast<char*>(sbrk(0)); }
}  // namespace

HeapHugePages::HeapHugePages() {
  mallopt(M_TOP_PAD, static_cast<int>(kTopPadBytes));
  marked_end_ = heap_end();
}

HeapHugePages::~HeapHugePages() { mallopt(M_TOP_PAD, kGlibcDefaultTopPad); }

void HeapHugePages::grew() {
  char* end = heap_end();
  if (end <= marked_end_) return;
  advise(marked_end_, static_cast<std::size_t>(end - marked_end_));
  marked_end_ = end;
}

void HeapHugePages::advise(const void* p, std::size_t bytes) {
  const auto from = (reinterpret_cast<std::uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const auto to = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);  // a hint: errors are ignored
}

#else

HeapHugePages::HeapHugePages() = default;
HeapHugePages::~HeapHugePages() = default;
void HeapHugePages::grew() {}
void HeapHugePages::advise(const void*, std::size_t) {}

#endif

}  // namespace collie::sim
