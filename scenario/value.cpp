#include "scenario/value.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/tensor.h"

namespace collie::scenario {

namespace {

using Int = Value::Int;
using UInt = Value::UInt;

// 2^127 as a double (exact): every double at or above it exceeds every Int.
constexpr double kTwo127 = 170141183460469231731687303715884105728.0;

bool is_digit_of(char c, int base) {
  if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  return c >= '0' && c < static_cast<char>('0' + base);
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

// Digits of `base` with single underscores between them (Python's
// digitpart; with `underscore_first`, one may come first, as after 0x).
// Returns the digits without underscores; `bad` is set when an underscore
// is not followed by a digit.
std::string digit_part(std::string_view s, std::size_t& pos, int base, bool underscore_first, bool& bad) {
  std::string digits;
  while (pos < s.size()) {
    if (s[pos] == '_' && (underscore_first || !digits.empty())) {
      if (pos + 1 >= s.size() || !is_digit_of(s[pos + 1], base)) {
        bad = true;
        return digits;
      }
      ++pos;
    }
    if (pos >= s.size() || !is_digit_of(s[pos], base)) break;
    digits += s[pos++];
  }
  return digits;
}

// The digits as an Int, or nullopt beyond 2^127 - 1.
std::optional<Int> to_int(const std::string& digits, int base) {
  UInt v = 0;
  const UInt limit = static_cast<UInt>(Value::kIntMax);
  for (char c : digits) {
    const UInt d = static_cast<UInt>(digit_value(c));
    if (v > (limit - d) / static_cast<UInt>(base)) return std::nullopt;
    v = v * static_cast<UInt>(base) + d;
  }
  return static_cast<Int>(v);
}

// The integers an integer dtype holds, [lo, hi], and how messages say so.
bool int_range(DType t, Int& lo, Int& hi, const char*& range) {
  switch (t) {
    case DType::kInt8: lo = -128, hi = 127, range = "-128 to 127"; return true;
    case DType::kUInt8: lo = 0, hi = 255, range = "0 to 255"; return true;
    case DType::kInt32: lo = INT32_MIN, hi = INT32_MAX, range = "-2147483648 to 2147483647"; return true;
    case DType::kInt64: lo = INT64_MIN, hi = INT64_MAX, range = "-2**63 to 2**63 - 1"; return true;
    default: return false;
  }
}

bool integer_dtype(DType t) { return !is_floating(t) && t != DType::kBool; }

}  // namespace

std::optional<std::int64_t> Value::whole() const {
  if (is_int_) {
    if (int_ < INT64_MIN || int_ > INT64_MAX) return std::nullopt;
    return static_cast<std::int64_t>(int_);
  }
  if (!std::isfinite(real_) || real_ != std::trunc(real_)) return std::nullopt;
  if (real_ < -9223372036854775808.0 || real_ >= 9223372036854775808.0) return std::nullopt;
  return static_cast<std::int64_t>(real_);
}

std::string Value::str() const { return is_int_ ? int_text(int_) : python_float(real_); }

std::string int_text(Value::Int v) {
  UInt m = v < 0 ? static_cast<UInt>(0) - static_cast<UInt>(v) : static_cast<UInt>(v);
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m != 0);
  return v < 0 ? "-" + s : s;
}

std::optional<int> compare(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.integer() < b.integer() ? -1 : a.integer() > b.integer() ? 1 : 0;
  if (!a.is_int() && !b.is_int()) {
    const double x = a.real(), y = b.real();
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  // An integer and a float, compared exactly (as Python does).
  const bool int_first = a.is_int();
  const Int i = int_first ? a.integer() : b.integer();
  const double f = int_first ? b.real() : a.real();
  if (std::isnan(f)) return std::nullopt;
  int c;  // i against f
  if (f >= kTwo127) {
    c = -1;
  } else if (f < -kTwo127) {
    c = 1;
  } else {
    const double fl = std::floor(f);  // a whole number within [-2^127, 2^127): an Int exactly
    const Int fi = static_cast<Int>(fl);
    c = i < fi ? -1 : i > fi ? 1 : (f == fl ? 0 : -1);
  }
  return int_first ? c : -c;
}

std::optional<Value> scan_number(std::string_view s, std::size_t& length, std::string& error, bool leading_zeros) {
  error.clear();
  length = 0;
  if (s.empty()) return std::nullopt;
  const bool digit0 = std::isdigit(static_cast<unsigned char>(s[0])) != 0;
  if (!digit0 && !(s[0] == '.' && s.size() > 1 && std::isdigit(static_cast<unsigned char>(s[1])))) return std::nullopt;
  std::size_t pos = 0;
  bool bad = false;
  // 0x, 0o, 0b
  if (s.size() > 1 && s[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    const int base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (base) {
      pos = 2;
      const std::string digits = digit_part(s, pos, base, true, bad);
      if (bad || digits.empty()) {
        error = "invalid " + std::string(base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary") + " literal";
        return std::nullopt;
      }
      const auto v = to_int(digits, base);
      if (!v) {
        error = "the integer " + std::string(s.substr(0, pos)) +
                " is beyond 128 bits (collie's integers are exact from -2**127 to 2**127 - 1)";
        return std::nullopt;
      }
      length = pos;
      return Value::integer(*v);
    }
  }
  const std::string int_part = digit_part(s, pos, 10, false, bad);
  bool is_float = false;
  std::string text = int_part;
  if (!bad && pos < s.size() && s[pos] == '.') {
    // 5. and .5 and 5.5; 5._5 is not a literal
    ++pos;
    is_float = true;
    text += '.';
    text += digit_part(s, pos, 10, false, bad);
  }
  if (!bad && pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
    std::size_t e = pos + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    if (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) {
      text += 'e';
      if (s[e - 1] == '-') text += '-';
      pos = e;
      text += digit_part(s, pos, 10, false, bad);
      is_float = true;
    }
  }
  if (bad) {
    error = "invalid decimal literal (an underscore goes between digits)";
    return std::nullopt;
  }
  length = pos;
  if (is_float) return Value::real(std::strtod(text.c_str(), nullptr));  // 1e400 is inf, as in Python
  if (!leading_zeros && int_part.size() > 1 && int_part[0] == '0' &&
      int_part.find_first_not_of('0') != std::string::npos) {
    error = "leading zeros in decimal integer literals are not permitted (as in Python); use 0o for octal";
    length = 0;
    return std::nullopt;
  }
  const auto v = to_int(int_part, 10);
  if (!v) {
    error = "the integer " + (int_part.size() > 50 ? int_part.substr(0, 47) + "..." : int_part) +
            " is beyond 128 bits (collie's integers are exact from -2**127 to 2**127 - 1)";
    length = 0;
    return std::nullopt;
  }
  return Value::integer(*v);
}

std::optional<std::string> value_unfit(DType dtype, const Value& v) {
  Int lo = 0, hi = 0;
  const char* range = "";
  if (!integer_dtype(dtype) || !int_range(dtype, lo, hi, range)) return std::nullopt;
  const std::string name(dtype_name(dtype));
  Int w = 0;
  if (v.is_int()) {
    w = v.integer();
  } else {
    if (!std::isfinite(v.real())) return v.str() + " is not a value of " + name;
    const double t = std::trunc(v.real());  // toward zero, as torch converts
    if (t < -kTwo127 || t >= kTwo127) return v.str() + " does not fit " + name + " (" + range + ")";
    w = static_cast<Int>(t);
  }
  if (w >= lo && w <= hi) return std::nullopt;
  return v.str() + " does not fit " + name + " (" + range + ")";
}

void store_element(Tensor& t, std::size_t i, const Value& v) {
  const DType d = t.dtype();
  if (d == DType::kBool) {
    t.set(i, v.truthy() ? 1.0 : 0.0);
  } else if (integer_dtype(d)) {
    t.set_int(i, v.is_int() ? static_cast<std::int64_t>(v.integer()) : static_cast<std::int64_t>(std::trunc(v.real())));
  } else if (v.is_int() && v.integer() >= INT64_MIN && v.integer() <= INT64_MAX) {
    t.set_int(i, static_cast<std::int64_t>(v.integer()));  // rounded once, as torch converts an int64
  } else {
    t.set(i, v.to_double());
  }
}

Value element_value(const Tensor& t, std::size_t i) {
  const DType d = t.dtype();
  if (d == DType::kBool) return Value(t.get(i) != 0 ? 1 : 0);
  if (integer_dtype(d)) return Value(t.get_int(i));
  return Value::real(t.get(i));
}

}  // namespace collie::scenario
