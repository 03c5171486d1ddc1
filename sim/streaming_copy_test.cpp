// streaming_copy leaves dst as memmove would, for sizes around the
// streaming threshold, every alignment of both ends, and overlaps.
#include "sim/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace collie::sim {
namespace {

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return v;
}

TEST(StreamingCopy, CopiesLikeMemmoveAtEverySizeAndAlignment) {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{63}, kStreamingCopyBytes - 1,
                            kStreamingCopyBytes, kStreamingCopyBytes + 1, kStreamingCopyBytes + 77}) {
    for (std::size_t src_off = 0; src_off < 16; src_off += 5) {
      for (std::size_t dst_off = 0; dst_off < 16; dst_off += 3) {
        const auto src = pattern(bytes + 32, static_cast<unsigned>(bytes + src_off));
        auto got = pattern(bytes + 32, 1);
        auto want = got;
        streaming_copy(got.data() + dst_off, src.data() + src_off, bytes);
        std::memmove(want.data() + dst_off, src.data() + src_off, bytes);
        ASSERT_EQ(got, want) << bytes << " bytes, src +" << src_off << ", dst +" << dst_off;
      }
    }
  }
}

TEST(StreamingCopy, OverlappingBuffersAreCopiedAsByMemmove) {
  const std::size_t bytes = kStreamingCopyBytes + 100;
  for (std::ptrdiff_t shift : {-4096, -3, 5, 4096}) {
    auto got = pattern(bytes + 8192, 3);
    auto want = got;
    const std::size_t from = 4096, to = static_cast<std::size_t>(4096 + shift);
    streaming_copy(got.data() + to, got.data() + from, bytes);
    std::memmove(want.data() + to, want.data() + from, bytes);
    ASSERT_EQ(got, want) << "shift " << shift;
  }
}

}  // namespace
}  // namespace collie::sim
