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
  for (std::byte& b : region)
    b = static_cast<std::byte>(kPattern[reinterpret_cast<std::uintptr_t>(&b) % kPattern.size()]);
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

bool holds_scribble(std::span<const std::byte> payload) {
  int run = 0;  // bytes in a row that follow the pattern
  for (std::size_t i = 0; i + 1 < payload.size(); ++i) {
    const auto b = static_cast<std::uint8_t>(payload[i]);
    if (kNext[b] != 0 && kNext[b] == static_cast<std::uint8_t>(payload[i + 1])) {
      if (++run >= 7) return true;
    } else {
      run = 0;
    }
  }
  return false;
}

}  // namespace collie
