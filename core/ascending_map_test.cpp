// AscendingMap behaves as a std::map for keys inserted in increasing order:
// the same finds and the same iteration after any erases.
#include "core/ascending_map.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <stdexcept>
#include <vector>

namespace collie {
namespace {

RC_GTEST_PROP(AscendingMap, AgreesWithStdMap, (std::vector<std::uint8_t> ops)) {
  AscendingMap<int> m;
  std::map<std::uint64_t, int> ref;
  std::uint64_t next = 1;
  for (std::uint8_t op : ops) {
    if (op % 3 != 0) {
      next += op % 5;  // gaps between keys are allowed
      m.insert_last(next) = op;
      ref[next] = op;
      ++next;
    } else {
      const std::uint64_t key = next == 1 ? 1 : 1 + op % next;
      auto it = m.find(key);
      RC_ASSERT((it != m.end()) == (ref.count(key) == 1));
      if (it != m.end()) {
        RC_ASSERT(it->second == ref[key]);
        m.erase(it);
        ref.erase(key);
      }
    }
  }
  std::vector<std::pair<std::uint64_t, int>> got(m.begin(), m.end());
  std::vector<std::pair<std::uint64_t, int>> want(ref.begin(), ref.end());
  RC_ASSERT(got == want);
  RC_ASSERT(m.size() == ref.size());
}

TEST(AscendingMap, AKeyNotAboveTheLastIsRefused) {
  AscendingMap<int> m;
  m.insert_last(5);
  EXPECT_THROW(m.insert_last(5), std::logic_error);
  EXPECT_THROW(m.insert_last(3), std::logic_error);
  EXPECT_EQ(m.size(), 1u);
}

}  // namespace
}  // namespace collie
