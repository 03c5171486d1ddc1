// Whole decimal numbers from text a user wrote (environment variables,
// command-line values): the whole text, digits only, inside a range.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace collie {

// The number `text` spells when it is a whole decimal number in [lo, hi]
// and nothing else; "2x", "", " 3", "+3" and out-of-range values give
// nullopt (std::atoi takes "2x" for 2 and "abc" for 0).
inline std::optional<long long> whole_number(std::string_view text, long long lo, long long hi) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace collie
