#include "core/tensor.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace collie {

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape) : Tensor(dtype, std::move(shape), true) {}

Tensor Tensor::phantom(DType dtype, std::vector<std::int64_t> shape) { return Tensor(dtype, std::move(shape), false); }

void Tensor::require_memory() const {
  if (!storage_) throw std::logic_error("a timing-only tensor has no elements to read or write");
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, bool allocate) : dtype_(dtype), shape_(std::move(shape)) {
  std::size_t n = 1;
  for (std::int64_t d : shape_) {
    if (d < 0) throw std::invalid_argument("tensor dimension is negative");
    n *= static_cast<std::size_t>(d);
  }
  count_ = n;
  if (!allocate) return;
  const std::size_t bytes = count_ * dtype_size(dtype_);
  // 64-byte aligned and zeroed; at least one byte so data() is never null.
  const std::size_t alloc = (bytes + 63) / 64 * 64 + 64;
  storage_ = std::shared_ptr<std::byte[]>(
      static_cast<std::byte*>(::operator new[](alloc, std::align_val_t{64})),
      [](std::byte* p) { ::operator delete[](p, std::align_val_t{64}); });
  std::memset(storage_.get(), 0, alloc);
}

double Tensor::get(std::size_t i) const {
  require_memory();
  switch (dtype_) {
    case DType::kFloat16: return as<Half>()[i].to_float();
    case DType::kBFloat16: return as<BFloat16>()[i].to_float();
    case DType::kFloat32: return as<float>()[i];
    case DType::kFloat64: return as<double>()[i];
    case DType::kInt8: return as<std::int8_t>()[i];
    case DType::kUInt8: return as<std::uint8_t>()[i];
    case DType::kInt32: return as<std::int32_t>()[i];
    case DType::kInt64: return static_cast<double>(as<std::int64_t>()[i]);
    case DType::kBool: return as<std::uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

namespace {
template <typename T>
T wrap_to(double v) {
  // Truncate toward zero, then wrap modulo 2^64 like a C cast of int64.
  if (!std::isfinite(v)) return T{};
  const double t = std::trunc(v);
  const auto w = static_cast<std::int64_t>(std::fmod(t, 18446744073709551616.0));
  return static_cast<T>(w);
}
}  // namespace

void Tensor::set(std::size_t i, double v) {
  require_memory();
  switch (dtype_) {
    case DType::kFloat16: as<Half>()[i] = Half::from_float(static_cast<float>(v)); break;
    case DType::kBFloat16: as<BFloat16>()[i] = BFloat16::from_float(static_cast<float>(v)); break;
    case DType::kFloat32: as<float>()[i] = static_cast<float>(v); break;
    case DType::kFloat64: as<double>()[i] = v; break;
    case DType::kInt8: as<std::int8_t>()[i] = wrap_to<std::int8_t>(v); break;
    case DType::kUInt8: as<std::uint8_t>()[i] = wrap_to<std::uint8_t>(v); break;
    case DType::kInt32: as<std::int32_t>()[i] = wrap_to<std::int32_t>(v); break;
    case DType::kInt64: as<std::int64_t>()[i] = wrap_to<std::int64_t>(v); break;
    case DType::kBool: as<std::uint8_t>()[i] = v != 0.0 ? 1 : 0; break;
  }
}

std::int64_t Tensor::get_int(std::size_t i) const {
  require_memory();
  if (dtype_ == DType::kInt64) return as<std::int64_t>()[i];
  return static_cast<std::int64_t>(get(i));
}

void Tensor::set_int(std::size_t i, std::int64_t v) {
  require_memory();
  switch (dtype_) {
    case DType::kInt64: as<std::int64_t>()[i] = v; break;
    case DType::kInt32: as<std::int32_t>()[i] = static_cast<std::int32_t>(v); break;
    case DType::kInt8: as<std::int8_t>()[i] = static_cast<std::int8_t>(v); break;
    case DType::kUInt8: as<std::uint8_t>()[i] = static_cast<std::uint8_t>(v); break;
    default: set(i, static_cast<double>(v)); break;
  }
}

std::string format_scalar(DType dtype, double v) {
  if (dtype == DType::kBool) return v != 0.0 ? "True" : "False";
  std::ostringstream os;
  if (is_floating(dtype)) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (v == std::trunc(v) && std::fabs(v) < 1e16) {
      os << static_cast<long long>(v) << ".0";
      if (v == 0 && std::signbit(v)) return "-0.0";
    } else {
      os.precision(dtype == DType::kFloat64 ? 17 : 8);
      os << v;
    }
  } else {
    os << static_cast<long long>(v);
  }
  return os.str();
}

namespace {
bool all_whole(const Tensor& t) {
  for (std::size_t i = 0; i < t.count(); ++i) {
    const double v = t.get(i);
    if (std::isfinite(v) && v != std::trunc(v)) return false;
  }
  return true;
}

// torch's repr: whole floats as "1." ; otherwise every element with four
// decimals ("0.5000"), as torch's default print options do.
std::string repr_value(const Tensor& t, std::size_t i, bool whole) {
  if (is_floating(t.dtype())) {
    const double v = t.get(i);
    if (!whole && std::isfinite(v)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.4f", v);
      return buf;
    }
    std::string s = format_scalar(t.dtype(), v);
    if (s.size() > 2 && s.ends_with(".0")) s.pop_back();
    return s;
  }
  if (t.dtype() == DType::kInt64) return std::to_string(t.get_int(i));
  return format_scalar(t.dtype(), t.get(i));
}
}  // namespace

std::string format_element(const Tensor& t, std::size_t i) {
  const double v = t.get(i);
  const bool whole = !std::isfinite(v) || v == std::trunc(v);
  return "tensor(" + repr_value(t, i, whole) + ")";
}

std::string format_tensor(const Tensor& t) {
  std::ostringstream os;
  os << "tensor([";
  const bool whole = all_whole(t);
  for (std::size_t i = 0; i < t.count(); ++i) {
    if (i) os << ", ";
    os << repr_value(t, i, whole);
  }
  os << "]";
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kInt64 && t.dtype() != DType::kBool)
    os << ", dtype=torch." << dtype_name(t.dtype());
  os << ")";
  return os.str();
}

}  // namespace collie
