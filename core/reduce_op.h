// Reduction operators and their host implementation.
//
// Semantics (torch.distributed's, with the stricter choice where backends
// differ):
//   - BAND/BOR/BXOR are defined for integer and bool dtypes only.
//   - AVG is defined for floating dtypes only; it is SUM followed by a division
//     by the group size, done once by whoever holds the final sum.
//   - On bool, SUM and MAX are logical OR; PRODUCT and MIN are logical AND.
//   - float16/bfloat16 are widened to float, combined, and rounded back to
//     nearest-even after every combination.
//   - Integer SUM/PRODUCT wrap modulo 2^bits (two's complement), as torch does.
//   - MIN/MAX propagate NaN, and order -0.0 below +0.0.
//   - Every floating combination that yields a NaN yields the canonical one
//     (positive, quiet, no payload; float16 0x7e00, bfloat16 0x7fc0).
// Every combination is commutative bit for bit, and MIN/MAX are associative
// in bits too, so their results do not depend on the algorithm; SUM and
// PRODUCT give identical bits for any tree shape on exact operands (signed
// zeros, infinities and NaNs included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace collie {

enum class ReduceOp : std::uint8_t {
  kSum = 0,
  kProduct = 1,
  kMin = 2,
  kMax = 3,
  kBand = 4,
  kBor = 5,
  kBxor = 6,
  kAvg = 7,
};

inline constexpr int kNumReduceOps = 8;

std::string_view reduce_op_name(ReduceOp op);  // "SUM", "PRODUCT", ...
std::optional<ReduceOp> parse_reduce_op(std::string_view name);  // case-insensitive

// Empty when `op` is defined on `dtype`; otherwise the reason, e.g.
// "BAND is not defined for float32 (bitwise ops need an integer or bool dtype)".
std::optional<std::string> reduce_op_unsupported(ReduceOp op, DType dtype);

// dst[i] = dst[i] (op) src[i] for i < count, on host memory. For AVG this
// combines as SUM; call finish_average once on the final sum.
// Requires: the op is supported on dtype; dst and src do not partially overlap.
void reduce_host(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
// The same, for operands that are in cache already (a short piece of a
// blocked pass): no prefetching ahead, which there would fetch the lines
// past the piece for nothing. Same results, bit for bit.
void reduce_host_in_cache(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);

// dst[i] /= divisor, for the floating dtypes (AVG's last step).
void finish_average_host(void* dst, std::size_t count, DType dtype, int divisor);

}  // namespace collie
