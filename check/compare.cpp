#include "check/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace collie::check {

double epsilon(DType t) {
  switch (t) {
    case DType::kFloat16: return 1.0 / 1024;
    case DType::kBFloat16: return 1.0 / 128;
    case DType::kFloat32: return 1.2e-7;
    case DType::kFloat64: return 2.3e-16;
    default: return 0;
  }
}

namespace {

// "0x7e00": an element's bits, most significant first (little-endian storage).
std::string hex_bits(const std::byte* p, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (std::size_t k = size; k-- > 0;) {
    const auto b = static_cast<unsigned>(p[k]);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

std::string compare_tensors(const Tensor& got, const Tensor& want, const CompareRule& rule, std::size_t* element) {
  if (got.dtype() != want.dtype())
    return std::string("is ") + std::string(dtype_name(got.dtype())) + ", " + rule.want_is + " " +
           std::string(dtype_name(want.dtype()));
  if (got.count() != want.count())
    return "has " + std::to_string(got.count()) + " elements, " + rule.want_is + " " + std::to_string(want.count());
  if (got.bytes() == 0 || std::memcmp(got.data(), want.data(), got.bytes()) == 0) return {};
  // Two operands combine once, in any order alike (a + b == b + a, each
  // rounded once): only three or more may round differently.
  const bool loose = rule.reduced && rule.contributors > 2 && is_floating(got.dtype()) &&
                     (rule.op == ReduceOp::kSum || rule.op == ReduceOp::kAvg || rule.op == ReduceOp::kProduct);
  const std::size_t es = dtype_size(got.dtype());
  const auto* g = static_cast<const std::byte*>(got.data());
  const auto* w = static_cast<const std::byte*>(want.data());
  for (std::size_t i = 0; i < got.count(); ++i) {
    if (std::memcmp(g + i * es, w + i * es, es) == 0) continue;
    if (is_floating(got.dtype()) && !rule.bitwise) {
      const double a = got.get(i), b = want.get(i);
      if (a == b || (std::isnan(a) && std::isnan(b))) continue;  // -0.0 == +0.0
      double scale = std::max(std::fabs(a), std::fabs(b));
      if (rule.magnitudes && rule.op != ReduceOp::kProduct && i < rule.magnitudes->count())
        scale = std::max(scale, std::fabs(rule.magnitudes->get(i)));
      if (loose && std::fabs(a - b) <= 2.0 * rule.contributors * epsilon(got.dtype()) * scale + 1e-300) continue;
    }
    std::string g_text = format_item(got, i), w_text = format_item(want, i);
    if (g_text == w_text) {  // a NaN's sign or payload, or a signalling NaN: show the bits
      g_text += " (" + hex_bits(g + i * es, es) + ")";
      w_text += " (" + hex_bits(w + i * es, es) + ")";
    }
    if (element) *element = i;
    return "element " + std::to_string(i) + " is " + g_text + ", " + rule.want_is + " " + w_text;
  }
  return {};
}

}  // namespace collie::check
