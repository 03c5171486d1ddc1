// The CUDA kernels' element-wise arithmetic (elementwise.h), compiled for
// the host, against the host reference (reduce_host, finish_average_host,
// Half, BFloat16) bit for bit: every dtype x ReduceOp the core supports, on
// random bits (NaNs, infinities, signed zeros and subnormals included), and
// every float16 and bfloat16 conversion. What the kernels add on a GPU --
// vector loads, grid-stride loops, the tail -- scripts/gpu_check.sh checks.
#include "backends/cuda/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace collie::cuda {
namespace {

// One element of dst op src by the shared arithmetic, on raw bytes.
void combine_one(DType dt, ReduceOp op, std::byte* d, const std::byte* s) {
  const Op o = static_cast<Op>(static_cast<int>(op));
  auto via = [&](auto a, auto b, auto f) {
    std::memcpy(&a, d, sizeof a);
    std::memcpy(&b, s, sizeof b);
    const auto r = f(a, b);
    std::memcpy(d, &r, sizeof r);
  };
  switch (dt) {
    case DType::kFloat16: via(std::uint16_t{}, std::uint16_t{}, [&](auto a, auto b) { return half_combine(a, b, o); }); break;
    case DType::kBFloat16: via(std::uint16_t{}, std::uint16_t{}, [&](auto a, auto b) { return bf16_combine(a, b, o); }); break;
    case DType::kFloat32: via(float{}, float{}, [&](auto a, auto b) { return float_combine(a, b, o); }); break;
    case DType::kFloat64: via(double{}, double{}, [&](auto a, auto b) { return float_combine(a, b, o); }); break;
    case DType::kInt8: via(std::int8_t{}, std::int8_t{}, [&](auto a, auto b) { return int_combine<std::int8_t, std::uint8_t>(a, b, o); }); break;
    case DType::kUInt8: via(std::uint8_t{}, std::uint8_t{}, [&](auto a, auto b) { return int_combine<std::uint8_t, std::uint8_t>(a, b, o); }); break;
    case DType::kInt32: via(std::int32_t{}, std::int32_t{}, [&](auto a, auto b) { return int_combine<std::int32_t, std::uint32_t>(a, b, o); }); break;
    case DType::kInt64: via(std::int64_t{}, std::int64_t{}, [&](auto a, auto b) { return int_combine<std::int64_t, std::uint64_t>(a, b, o); }); break;
    case DType::kBool: via(std::uint8_t{}, std::uint8_t{}, [&](auto a, auto b) { return bool_combine(a, b, o); }); break;
  }
}

// Random elements of `dt`: raw bits, with the special values of floating
// dtypes a quarter of the time.
std::vector<std::byte> random_elements(DType dt, std::size_t n, std::mt19937_64& rng) {
  const std::size_t es = dtype_size(dt);
  std::vector<std::byte> out(n * es);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = rng();
    if (dt == DType::kBool) bits &= 1;
    if (is_floating(dt) && rng() % 4 == 0) {
      const int exp_bits = dt == DType::kFloat16 ? 5 : dt == DType::kFloat64 ? 11 : 8;
      const int mant_bits = static_cast<int>(es * 8) - 1 - exp_bits;
      const std::uint64_t sign = (bits & 1) << (exp_bits + mant_bits);
      const std::uint64_t inf = ((std::uint64_t{1} << exp_bits) - 1) << mant_bits;
      switch (rng() % 5) {
        case 0: bits = sign; break;                            // signed zero
        case 1: bits = sign | inf; break;                      // infinity
        case 2: bits = sign | inf | (rng() % 7 + 1); break;    // NaN with a payload
        case 3: bits = sign | (rng() % 64 + 1); break;         // subnormal
        default: bits = sign | (bits & ((std::uint64_t{1} << (exp_bits + mant_bits)) - 1)); break;
      }
    }
    std::memcpy(out.data() + i * es, &bits, es);
  }
  return out;
}

TEST(CudaElementwise, EveryDtypeAndOpGivesTheHostReferencesBits) {
  std::mt19937_64 rng(20261123);
  constexpr std::size_t kN = 4096;
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dt = static_cast<DType>(d);
    const std::size_t es = dtype_size(dt);
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduce_op_unsupported(op, dt)) continue;
      const std::vector<std::byte> a = random_elements(dt, kN, rng), b = random_elements(dt, kN, rng);
      std::vector<std::byte> host = a, shared = a;
      reduce_host(host.data(), b.data(), kN, dt, op);
      for (std::size_t i = 0; i < kN; ++i) combine_one(dt, op, shared.data() + i * es, b.data() + i * es);
      for (std::size_t i = 0; i < kN; ++i) {
        if (std::memcmp(host.data() + i * es, shared.data() + i * es, es) == 0) continue;
        std::uint64_t x = 0, y = 0, h = 0, s = 0;
        std::memcpy(&x, a.data() + i * es, es);
        std::memcpy(&y, b.data() + i * es, es);
        std::memcpy(&h, host.data() + i * es, es);
        std::memcpy(&s, shared.data() + i * es, es);
        ADD_FAILURE() << dtype_name(dt) << " " << reduce_op_name(op) << " element " << i << ": 0x" << std::hex << x
                      << " op 0x" << y << " is 0x" << s << " in the kernels' arithmetic, 0x" << h << " on the host";
        break;
      }
    }
  }
}

TEST(CudaElementwise, AverageFinishesAsTheHostDoes) {
  std::mt19937_64 rng(7);
  for (int k = 0; k < 20000; ++k) {
    const auto h = static_cast<std::uint16_t>(rng());
    const int n = 1 + static_cast<int>(rng() % 64);
    Half hh{h};
    finish_average_host(&hh, 1, DType::kFloat16, n);
    BFloat16 bb{h};
    finish_average_host(&bb, 1, DType::kBFloat16, n);
    const std::uint16_t want_h = hh.bits, want_b = bb.bits;
    if (!std::isnan(half_to_float(h))) {
      ASSERT_EQ(half_average(h, n), want_h) << std::hex << h << " / " << std::dec << n;
    }
    if (!std::isnan(bf16_to_float(h))) {
      ASSERT_EQ(bf16_average(h, n), want_b) << std::hex << h << " / " << std::dec << n;
    }
  }
}

TEST(CudaElementwise, HalfConversionsRoundToNearestEvenAsTheHostDoes) {
  // Every float16 and bfloat16 value widens exactly as the host's does.
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const float f = half_to_float(b), g = Half{b}.to_float();
    ASSERT_TRUE(std::memcmp(&f, &g, 4) == 0 || (std::isnan(f) && std::isnan(g))) << std::hex << h;
    ASSERT_EQ(float_bits(bf16_to_float(b)), float_bits(BFloat16{b}.to_float())) << std::hex << h;
  }
  // Narrowing: random floats around float16's range, and every halfway case.
  std::mt19937_64 rng(11);
  auto check = [](float f) {
    if (std::isnan(f)) return;
    ASSERT_EQ(float_to_half(f), Half::from_float(f).bits) << f << " (0x" << std::hex << float_bits(f) << ")";
    ASSERT_EQ(float_to_bf16(f), BFloat16::from_float(f).bits) << f << " (0x" << std::hex << float_bits(f) << ")";
  };
  for (int k = 0; k < 200000; ++k) {
    const auto exp = static_cast<std::uint32_t>(95 + rng() % 50);  // 2^-32 .. 2^17
    check(bits_float(static_cast<std::uint32_t>(rng() & 0x807fffffu) | exp << 23));
    check(bits_float(static_cast<std::uint32_t>(rng())));
  }
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // halfway between float16 neighbours
    const float lo = Half{static_cast<std::uint16_t>(h)}.to_float();
    const float hi = Half{static_cast<std::uint16_t>(h + 1)}.to_float();
    check((lo + hi) / 2);
    check(-(lo + hi) / 2);
  }
}

}  // namespace
}  // namespace collie::cuda
