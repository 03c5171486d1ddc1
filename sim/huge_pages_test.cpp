// The heap grown while a HeapHugePages lives is marked for huge pages (the
// kernel's VmFlags "hg" on its mapping), and M_TOP_PAD goes back after.
#include "sim/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace collie::sim {
namespace {

#if defined(__linux__) && defined(__GLIBC__)
// The VmFlags of the mapping that holds `p`, from /proc/self/smaps.
std::string vm_flags_of(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(HeapHugePages, MarksTheHeapItGrowsIntoAndNothingElseChanges) {
  std::vector<void*> blocks;
  {
    HeapHugePages huge;
    // Small blocks come from the brk heap; 96 MiB of them grow it past one
    // top pad.
    for (int i = 0; i < 96 * 1024; ++i) blocks.push_back(std::malloc(1000));
    huge.grew();
    const std::string flags = vm_flags_of(blocks.back());
    ASSERT_FALSE(flags.empty()) << "no mapping holds a malloc'd block";
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
  for (void* b : blocks) std::free(b);
}
#endif

TEST(HeapHugePages, AdviseOfAnyRangeIsHarmless) {
  std::vector<char> small(100);
  HeapHugePages::advise(small.data(), small.size());  // less than a page: nothing to mark
  HeapHugePages::advise(nullptr, 0);
  small[0] = 1;
  EXPECT_EQ(small[0], 1);
}

}  // namespace
}  // namespace collie::sim
