// HeapHugePages: asks the kernel to back the process heap with transparent
// huge pages (2 MiB) while a large simulation runs.
//
// Why: at 10^5 ranks a simulation's working set is ~10^9 bytes of small
// per-rank objects, touched in the order events run -- nearly at random.
// With 4 KiB pages almost every touch also misses the TLB (it covers a few
// MiB); with 2 MiB pages it covers the whole working set's page tables.
// Measured: 131,072-rank all_reduce 29% less CPU (docs/PERFORMANCE.md).
//
// How: where transparent huge pages are "madvise"-only (Debian's default),
// memory gets them only inside ranges marked MADV_HUGEPAGE. The heap grows
// by brk; while an instance lives, malloc grows it in steps of
// kTopPadBytes (M_TOP_PAD), and grew() marks what the heap has grown by
// since the last call, so nearly every later page fault there gets a huge
// page. Large blocks malloc maps on its own are marked by advise() where
// the simulator makes them.
//
// Only a hint: nothing here changes what a program computes, only where
// its memory sits. On systems without THP (or with it "always" or "never")
// it does nothing useful and no harm; elsewhere than Linux/glibc, nothing.
// Not thread-safe; one instance at a time per process is meaningful.
#pragma once

#include <cstddef>

namespace collie::sim {

class HeapHugePages {
 public:
  static constexpr std::size_t kTopPadBytes = std::size_t{64} << 20;

  HeapHugePages();
  ~HeapHugePages();
  HeapHugePages(const HeapHugePages&) = delete;
  HeapHugePages& operator=(const HeapHugePages&) = delete;

  // Marks the heap grown since the last call (cheap when it has not grown:
  // one comparison).
  void grew();
  // Marks [p, p + bytes) (whole 2 MiB pages inside it).
  static void advise(const void* p, std::size_t bytes);

 private:
  char* marked_end_ = nullptr;  // the heap is marked up to here
};

}  // namespace collie::sim
