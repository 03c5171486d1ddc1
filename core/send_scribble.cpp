#include "core/send_scribble.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace collie {

namespace {

// Eight distinct bytes, laid down by address (the byte at address a is
// kPattern[a % 8]), so that any eight in a row of a scribbled region are a
// rotation of the pattern wherever a payload starts.
constexpr std::array<std::uint8_t, 8> kPattern = {0xc5, 0x1e, 0x7a, 0xd3, 0x2b, 0x96, 0xe1, 0x4f};

// kNext[b]: the byte after b in the pattern; 0 for bytes not in it (0 is
// not in it).
constexpr std::array<std::uint8_t, 256> next_table() {
  std::array<std::uint8_t, 256> t{};
  for (std::size_t i = 0; i < kPattern.size(); ++i) t[kPattern[i]] = kPattern[(i + 1) % kPattern.size()];
  return t;
}
constexpr std::array<std::uint8_t, 256> kNext = next_table();

// The ranks' scribbles not yet restored, on this thread (a job's ranks
// share one).
thread_local std::vector<SendScribble*> g_pending;

}  // namespace

SendScribble::~SendScribble() { restore(); }

void SendScribble::scribble(std::span<std::byte> region, std::shared_ptr<void> keepalive) {
  if (region.empty()) return;
  if (saved_.empty()) g_pending.push_back(this);
  saved_.push_back(Saved{region.data(), std::vector<std::byte>(region.begin(), region.end()), std::move(keepalive)});
  // Byte by byte up to an 8-aligned address, then whole words: at an
  // aligned address the pattern starts at kPattern[0].
  std::byte* b = region.data();
  std::byte* const end = b + region.size();
  for (; b != end && reinterpret_cast<std::uintptr_t>(b) % kPattern.size() != 0; ++b)
    *b = static_cast<std::byte>(kPattern[reinterpret_cast<std::uintptr_t>(b) % kPattern.size()]);
  for (; end - b >= static_cast<std::ptrdiff_t>(kPattern.size()); b += kPattern.size())
    std::memcpy(b, kPattern.data(), kPattern.size());
  for (std::size_t k = 0; b != end; ++b, ++k) *b = static_cast<std::byte>(kPattern[k]);
}

void SendScribble::restore() {
  if (saved_.empty()) return;
  for (const Saved& s : saved_) std::memcpy(s.at, s.bytes.data(), s.bytes.size());
  saved_.clear();
  std::erase(g_pending, this);
}

void restore_scribbles(const Executor* executor) {
  if (g_pending.empty()) return;
  for (std::size_t i = g_pending.size(); i-- > 0;)
    if (g_pending[i]->owner() == executor) g_pending[i]->restore();
}

namespace {

// Whether payload[first, last) holds eight bytes in a row that follow the
// pattern (seven successive pairs).
bool holds_run(std::span<const std::byte> payload, std::size_t first, std::size_t last) {
  int run = 0;  // successive pairs in a row that follow the pattern
  for (std::size_t i = first; i + 1 < last; ++i) {
    const auto b = static_cast<std::uint8_t>(payload[i]);
    if (kNext[b] != 0 && kNext[b] == static_cast<std::uint8_t>(payload[i + 1])) {
      if (++run >= 7) return true;
    } else {
      run = 0;
    }
  }
  return false;
}

}  // namespace

bool holds_scribble(std::span<const std::byte> payload) {
  // Eight bytes in a row, [s, s + 8), hold an index i = 0 mod 4 with
  // s <= i <= s + 3, and lie inside [i - 7, i + 8): only the indices
  // 0 mod 4 that hold a pattern byte need a look around them.
  const std::size_t n = payload.size();
  for (std::size_t i = 0; i < n; i += 4) {
    if (kNext[static_cast<std::uint8_t>(payload[i])] == 0) continue;
    if (holds_run(payload, i < 7 ? 0 : i - 7, std::min(n, i + 8))) return true;
  }
  return false;
}

}  // namespace collie
