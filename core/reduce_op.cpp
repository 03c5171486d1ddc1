#include "core/reduce_op.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace collie {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "SUM";
    case ReduceOp::kProduct: return "PRODUCT";
    case ReduceOp::kMin: return "MIN";
    case ReduceOp::kMax: return "MAX";
    case ReduceOp::kBand: return "BAND";
    case ReduceOp::kBor: return "BOR";
    case ReduceOp::kBxor: return "BXOR";
    case ReduceOp::kAvg: return "AVG";
  }
  return "?";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int i = 0; i < kNumReduceOps; ++i) {
    auto op = static_cast<ReduceOp>(i);
    if (reduce_op_name(op) == up) return op;
  }
  if (up == "PROD") return ReduceOp::kProduct;
  return std::nullopt;
}

std::optional<std::string> reduce_op_unsupported(ReduceOp op, DType dtype) {
  const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
  if (bitwise && is_floating(dtype)) {
    return std::string(reduce_op_name(op)) + " is not defined for " + std::string(dtype_name(dtype)) +
           " (bitwise ops need an integer or bool dtype)";
  }
  if (op == ReduceOp::kAvg && !is_floating(dtype)) {
    return std::string("AVG is not defined for ") + std::string(dtype_name(dtype)) +
           " (it needs a floating dtype; use SUM and divide)";
  }
  return std::nullopt;
}

namespace {

// Arithmetic on the storage type T through the compute type C.
template <typename T>
struct Widen {
  using C = T;
  static C load(T v) { return v; }
  static T store(C v) { return v; }
};
template <>
struct Widen<Half> {
  using C = float;
  static C load(Half v) { return v.to_float(); }
  static Half store(C v) { return Half::from_float(v); }
};
template <>
struct Widen<BFloat16> {
  using C = float;
  static C load(BFloat16 v) { return v.to_float(); }
  static BFloat16 store(C v) { return BFloat16::from_float(v); }
};

// Every floating combination that yields a NaN yields this one (positive,
// quiet, no payload): which NaN an IEEE operation returns depends on the
// order of its operands, and results must not.
template <typename C>
C canonical(C r) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(r)) return std::numeric_limits<C>::quiet_NaN();
  }
  return r;
}

template <typename C>
C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return canonical(a + b);
  }
}
template <typename C>
C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    // Promote to at least unsigned int so small types do not become signed int.
    using P = std::common_type_t<U, unsigned>;
    return static_cast<C>(static_cast<U>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b))));
  } else {
    return canonical(a * b);
  }
}
// MIN and MAX order -0.0 below +0.0 (IEEE 754-2019 minimum/maximum), so a
// tie between the zeros has one answer whichever operand comes first. Equal
// operands have equal bits except for the zeros, where OR keeps the sign
// (MIN: -0.0) and AND drops it (MAX: +0.0); branch-free, so it vectorizes.
template <typename C>
using Bits = std::conditional_t<sizeof(C) == 8, std::uint64_t, std::uint32_t>;
template <typename C>
C nan_min(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    const C tie = std::bit_cast<C>(static_cast<Bits<C>>(std::bit_cast<Bits<C>>(a) | std::bit_cast<Bits<C>>(b)));
    const C r = b < a ? b : (a == b ? tie : a);
    return a != a || b != b ? std::numeric_limits<C>::quiet_NaN() : r;
  } else {
    return b < a ? b : a;
  }
}
template <typename C>
C nan_max(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    const C tie = std::bit_cast<C>(static_cast<Bits<C>>(std::bit_cast<Bits<C>>(a) & std::bit_cast<Bits<C>>(b)));
    const C r = a < b ? b : (a == b ? tie : a);
    return a != a || b != b ? std::numeric_limits<C>::quiet_NaN() : r;
  } else {
    return a < b ? b : a;
  }
}

// Blocks of 256 bytes, each first asking for the operands' cache lines
// kPrefetchBytes ahead: a large reduction streams both operands from memory,
// and the hardware prefetchers alone left the loop waiting on loads (float32
// SUM over 1,024 x 1 MiB cold buffers, halving-doubling's pattern: 8% less
// CPU time at 1 KiB ahead, the best of 0.5-4 KiB). Prefetches never fault,
// so those past either end are harmless; results are the same bits.
constexpr std::size_t kBlockBytes = 256;
constexpr std::size_t kPrefetchBytes = 1024;
// The address kPrefetchBytes + line past p, as an integer: it may lie
// outside the buffer.
inline const void* ahead(const void* p, std::size_t line) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + kPrefetchBytes + line);
}

template <typename T, bool Ahead, typename F>
void apply(void* dst, const void* src, std::size_t n, F f) {
  using W = Widen<T>;
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if constexpr (Ahead)
      for (std::size_t line = 0; line < kBlockBytes; line += 64) {
        __builtin_prefetch(ahead(s + i, line), 0);
        __builtin_prefetch(ahead(d + i, line), 1);
      }
    for (std::size_t j = i; j < i + kBlock; ++j) d[j] = W::store(f(W::load(d[j]), W::load(s[j])));
  }
  for (; i < n; ++i) d[i] = W::store(f(W::load(d[i]), W::load(s[i])));
}

template <typename T, bool Ahead>
void reduce_typed(void* dst, const void* src, std::size_t n, ReduceOp op) {
  using C = typename Widen<T>::C;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      apply<T, Ahead>(dst, src, n, [](C a, C b) { return wrap_add(a, b); });
      return;
    case ReduceOp::kProduct:
      apply<T, Ahead>(dst, src, n, [](C a, C b) { return wrap_mul(a, b); });
      return;
    case ReduceOp::kMin:
      apply<T, Ahead>(dst, src, n, [](C a, C b) { return nan_min(a, b); });
      return;
    case ReduceOp::kMax:
      apply<T, Ahead>(dst, src, n, [](C a, C b) { return nan_max(a, b); });
      return;
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      if constexpr (std::is_integral_v<C>) {
        if (op == ReduceOp::kBand) apply<T, Ahead>(dst, src, n, [](C a, C b) { return static_cast<C>(a & b); });
        if (op == ReduceOp::kBor) apply<T, Ahead>(dst, src, n, [](C a, C b) { return static_cast<C>(a | b); });
        if (op == ReduceOp::kBxor) apply<T, Ahead>(dst, src, n, [](C a, C b) { return static_cast<C>(a ^ b); });
      }
      return;
  }
}

void reduce_bool(void* dst, const void* src, std::size_t n, ReduceOp op) {
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  for (std::size_t i = 0; i < n; ++i) {
    const bool a = d[i] != 0, b = s[i] != 0;
    bool r = false;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor: r = a || b; break;
      case ReduceOp::kProduct:
      case ReduceOp::kMin:
      case ReduceOp::kBand: r = a && b; break;
      case ReduceOp::kBxor: r = a != b; break;
      case ReduceOp::kAvg: r = a || b; break;  // rejected before it gets here
    }
    d[i] = r ? 1 : 0;
  }
}

// The dispatch on dtype, for both entry points below; `Ahead`: prefetch the
// operands kPrefetchBytes ahead of the loop.
template <bool Ahead>
void reduce_any(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat16: reduce_typed<Half, Ahead>(dst, src, count, op); return;
    case DType::kBFloat16: reduce_typed<BFloat16, Ahead>(dst, src, count, op); return;
    case DType::kFloat32: reduce_typed<float, Ahead>(dst, src, count, op); return;
    case DType::kFloat64: reduce_typed<double, Ahead>(dst, src, count, op); return;
    case DType::kInt8: reduce_typed<std::int8_t, Ahead>(dst, src, count, op); return;
    case DType::kUInt8: reduce_typed<std::uint8_t, Ahead>(dst, src, count, op); return;
    case DType::kInt32: reduce_typed<std::int32_t, Ahead>(dst, src, count, op); return;
    case DType::kInt64: reduce_typed<std::int64_t, Ahead>(dst, src, count, op); return;
    case DType::kBool: reduce_bool(dst, src, count, op); return;
  }
}

}  // namespace

// The kernels are inlined into one body compiled twice, for AVX2 and for the
// baseline, picked at load time: the canonical-NaN and signed-zero checks
// cost little in 32-byte vectors (float32 MAX over 4 MiB: 61 GB/s without
// them in 16-byte vectors, 29 with them, 83 with them in 32-byte ones; SUM
// 123, 84, 118).
// Neither clone contracts to FMA, so both give the same bits.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((flatten, target_clones("avx2", "default")))
#endif
void reduce_host(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  reduce_any<true>(dst, src, count, dtype, op);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((flatten, target_clones("avx2", "default")))
#endif
void reduce_host_in_cache(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  reduce_any<false>(dst, src, count, dtype, op);
}

void finish_average_host(void* dst, std::size_t count, DType dtype, int divisor) {
  switch (dtype) {
    case DType::kFloat16: {
      auto* d = static_cast<Half*>(dst);
      for (std::size_t i = 0; i < count; ++i) d[i] = Half::from_float(d[i].to_float() / static_cast<float>(divisor));
      return;
    }
    case DType::kBFloat16: {
      auto* d = static_cast<BFloat16*>(dst);
      for (std::size_t i = 0; i < count; ++i)
        d[i] = BFloat16::from_float(d[i].to_float() / static_cast<float>(divisor));
      return;
    }
    case DType::kFloat32: {
      auto* d = static_cast<float*>(dst);
      for (std::size_t i = 0; i < count; ++i) d[i] /= static_cast<float>(divisor);
      return;
    }
    case DType::kFloat64: {
      auto* d = static_cast<double*>(dst);
      for (std::size_t i = 0; i < count; ++i) d[i] /= static_cast<double>(divisor);
      return;
    }
    default:
      return;
  }
}

}  // namespace collie
