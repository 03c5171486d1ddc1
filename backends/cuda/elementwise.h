// The element-wise arithmetic of the CUDA reduction kernels, written once
// for the device and the host: one element of `dst op src` for every dtype
// and ReduceOp the core supports, with the core's rules (core/reduce_op.h):
// integers wrap, float16 and bfloat16 are widened to float, combined and
// rounded back to nearest even, every NaN result is the canonical NaN, MIN
// and MAX propagate NaN and order -0.0 below +0.0, bool SUM/MAX are OR and
// PRODUCT/MIN are AND.
//
// Compiled by nvcc for the kernels (reduce_kernels.cu) and by the host
// compiler for elementwise_test.cpp, which checks it bit for bit against
// the host reference (reduce_host) on every dtype x op: most of the
// kernels' logic is verified on a machine without a GPU.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define COLLIE_HD __host__ __device__ __forceinline__
#else
#define COLLIE_HD inline
#endif

namespace collie::cuda {

// The ReduceOp values, as plain integers (this header includes nothing of
// the core, so that nvcc compiles it alone).
enum class Op : int { kSum = 0, kProduct, kMin, kMax, kBand, kBor, kBxor, kAvg };

// std::bit_cast for host and device code (nvcc compiles this header as C++17).
template <typename To, typename From>
COLLIE_HD To bit_copy(From from) {
  static_assert(sizeof(To) == sizeof(From), "bit_copy between types of one size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
COLLIE_HD std::uint32_t float_bits(float f) { return bit_copy<std::uint32_t>(f); }
COLLIE_HD float bits_float(std::uint32_t u) { return bit_copy<float>(u); }

// ---- float16 and bfloat16, round to nearest even ------------------------

COLLIE_HD float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  return bits_float(sign | (exp + 112) << 23 | (mant << 13));
}

COLLIE_HD std::uint16_t float_to_half(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (NaN stays quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in half: shift the 24-bit significand, round to even.
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exp;  // 14 + (112 - exp) ... to a 10-bit subnormal
    std::uint32_t r = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const std::uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

COLLIE_HD float bf16_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

COLLIE_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays quiet
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// ---- one combination ----------------------------------------------------

COLLIE_HD float canonical(float r) { return r != r ? bits_float(0x7fc00000u) : r; }
COLLIE_HD double canonical(double r) { return r != r ? bit_copy<double>(std::uint64_t{0x7ff8000000000000ull}) : r; }

template <typename F>
COLLIE_HD F float_combine(F a, F b, Op op) {
  using Bits = std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>;
  switch (op) {
    case Op::kSum:
    case Op::kAvg: return canonical(a + b);
    case Op::kProduct: return canonical(a * b);
    case Op::kMin:
      if (a != a || b != b) return canonical(a != a ? a : b);
      if (a == b) return bit_copy<F>(bit_copy<Bits>(a) | bit_copy<Bits>(b));  // -0.0 below +0.0
      return b < a ? b : a;
    case Op::kMax:
      if (a != a || b != b) return canonical(a != a ? a : b);
      if (a == b) return bit_copy<F>(bit_copy<Bits>(a) & bit_copy<Bits>(b));  // +0.0 above -0.0
      return a < b ? b : a;
    default: return a;  // bitwise ops are refused for floating dtypes before they get here
  }
}

// Integers (T unsigned or signed of any width) wrap modulo 2^bits.
template <typename T, typename U>
COLLIE_HD T int_combine(T a, T b, Op op) {
  const U ua = static_cast<U>(a), ub = static_cast<U>(b);
  switch (op) {
    case Op::kSum: return static_cast<T>(static_cast<U>(ua + ub));
    case Op::kProduct: {
      using P = decltype(ua * 1u);  // at least unsigned int
      return static_cast<T>(static_cast<U>(static_cast<P>(ua) * static_cast<P>(ub)));
    }
    case Op::kMin: return b < a ? b : a;
    case Op::kMax: return a < b ? b : a;
    case Op::kBand: return static_cast<T>(ua & ub);
    case Op::kBor: return static_cast<T>(ua | ub);
    case Op::kBxor: return static_cast<T>(ua ^ ub);
    default: return a;
  }
}

COLLIE_HD std::uint8_t bool_combine(std::uint8_t a, std::uint8_t b, Op op) {
  const bool x = a != 0, y = b != 0;
  switch (op) {
    case Op::kProduct:
    case Op::kMin:
    case Op::kBand: return (x && y) ? 1 : 0;
    case Op::kBxor: return x != y ? 1 : 0;
    default: return (x || y) ? 1 : 0;  // SUM, MAX, BOR
  }
}

COLLIE_HD std::uint16_t half_combine(std::uint16_t a, std::uint16_t b, Op op) {
  return float_to_half(float_combine(half_to_float(a), half_to_float(b), op));
}
COLLIE_HD std::uint16_t bf16_combine(std::uint16_t a, std::uint16_t b, Op op) {
  return float_to_bf16(float_combine(bf16_to_float(a), bf16_to_float(b), op));
}

// AVG's last step: the sum divided by the number of contributors, rounded
// to the dtype as the host's finish_average_host does.
COLLIE_HD std::uint16_t half_average(std::uint16_t sum, int n) {
  return float_to_half(half_to_float(sum) / static_cast<float>(n));
}
COLLIE_HD std::uint16_t bf16_average(std::uint16_t sum, int n) {
  return float_to_bf16(bf16_to_float(sum) / static_cast<float>(n));
}

}  // namespace collie::cuda
