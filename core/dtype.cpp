#include "core/dtype.h"

#include <cmath>
#include <cstring>

namespace collie {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "float16" || n == "half") return DType::kFloat16;
  if (n == "bfloat16") return DType::kBFloat16;
  if (n == "float32" || n == "float") return DType::kFloat32;
  if (n == "float64" || n == "double") return DType::kFloat64;
  if (n == "int8") return DType::kInt8;
  if (n == "uint8") return DType::kUInt8;
  if (n == "int32" || n == "int") return DType::kInt32;
  if (n == "int64" || n == "long") return DType::kInt64;
  if (n == "bool") return DType::kBool;
  return std::nullopt;
}

std::string describe_elements(DType t, std::uint64_t count) {
  return std::string(dtype_name(t)) + " x " + std::to_string(count) + " (" + std::to_string(count * dtype_size(t)) +
         " bytes)";
}

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

Half Half::from_float(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  Half h;
  if (abs >= 0x7f800000u) {  // inf or NaN
    h.bits = static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return h;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h.bits = static_cast<std::uint16_t>(sign | 0x7c00u);
    return h;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Scale so that the half subnormal's integer lands in the low bits, rounding
    // to nearest-even through float arithmetic (exact: 2^24 is a power of two).
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24
    const float r = std::nearbyint(scaled);
    h.bits = static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(r));
    return h;
  }
  // Normal: rebias exponent from 127 to 15 and round mantissa 23 -> 10 bits.
  std::uint32_t mant = abs & 0x7fffffu;
  std::uint32_t exp = (abs >> 23) - 127 + 15;
  std::uint32_t out = (exp << 10) | (mant >> 13);
  const std::uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (out & 1u))) ++out;  // may carry into exp
  h.bits = static_cast<std::uint16_t>(sign | out);
  return h;
}

float Half::to_float() const {
  const std::uint32_t sign = (static_cast<std::uint32_t>(bits) & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) / 16777216.0f;  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

BFloat16 BFloat16::from_float(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  BFloat16 b;
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and NaN
    b.bits = static_cast<std::uint16_t>((x >> 16) | 0x40u);
    return b;
  }
  const std::uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  b.bits = static_cast<std::uint16_t>(x >> 16);
  return b;
}

}  // namespace collie
