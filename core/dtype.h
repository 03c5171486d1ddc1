// Element types of tensors that collie moves and reduces.
//
// The set matches what torch.distributed's CPU backends accept for
// collectives: float16, bfloat16, float32, float64, int8, uint8, int32, int64
// and bool. Every message on the wire carries its DType so that a receiver
// can refuse data of the wrong type instead of reinterpreting bytes.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace collie {

enum class DType : std::uint8_t {
  kFloat16 = 0,
  kBFloat16 = 1,
  kFloat32 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 8,
};

inline constexpr int kNumDTypes = 9;

// Size of one element in bytes.
std::size_t dtype_size(DType t);

// torch's spelling: "float32", "bfloat16", "int64", "bool", ...
std::string_view dtype_name(DType t);

// Parses torch's spelling (and the aliases "float", "double", "half", "long",
// "int"); nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

bool is_floating(DType t);

// "float32 x 2 (8 bytes)": how errors and reports describe a payload.
std::string describe_elements(DType t, std::uint64_t count);

// IEEE 754 binary16, stored as raw bits. Arithmetic goes through float and is
// rounded back to nearest-even, as torch does on CPU.
struct Half {
  std::uint16_t bits = 0;
  static Half from_float(float f);
  float to_float() const;
};

// bfloat16: the upper 16 bits of a float32, rounded to nearest-even.
struct BFloat16 {
  std::uint16_t bits = 0;
  static BFloat16 from_float(float f);
  float to_float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }
};

}  // namespace collie
