#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace collie {

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape) : Tensor(dtype, std::move(shape), true) {}

Tensor Tensor::phantom(DType dtype, std::vector<std::int64_t> shape) { return Tensor(dtype, std::move(shape), false); }

Tensor Tensor::with_head(DType dtype, std::vector<std::int64_t> shape, std::size_t head_bytes) {
  if (head_bytes > 4096) throw std::length_error("a tensor's head of " + std::to_string(head_bytes) + " bytes is over 4 KiB");
  return Tensor(dtype, std::move(shape), true, head_bytes);
}

void Tensor::require_memory() const {
  if (!storage_) throw std::logic_error("a timing-only tensor has no elements to read or write");
}

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape, bool allocate, std::size_t head_bytes)
    : dtype_(dtype), shape_(std::move(shape)), head_bytes_(head_bytes) {
  std::size_t n = 1;
  for (std::int64_t d : shape_) {
    if (d < 0) throw std::invalid_argument("tensor dimension is negative");
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) n = SIZE_MAX;
  }
  // Every size below (bytes, the allocation rounded up) is then exact.
  std::size_t bytes = 0;
  if (n == SIZE_MAX || __builtin_mul_overflow(n, dtype_size(dtype_), &bytes) || bytes > (SIZE_MAX >> 2)) {
    std::string dims;
    for (std::int64_t d : shape_) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw std::length_error("a tensor of shape [" + dims + "] (" + std::string(dtype_name(dtype_)) +
                            ") has more bytes than memory can address");
  }
  count_ = n;
  if (!allocate) return;
  // 64-byte aligned and zeroed; at least one byte so data() is never null.
  const std::size_t alloc = allocation_bytes(head_bytes_ + bytes);
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
    // Rounded once, from the integer (through a double, 2^60 + 2^36 + 1
    // would round twice): as torch converts an int64.
    case DType::kFloat64: as<double>()[i] = static_cast<double>(v); break;
    case DType::kFloat32: as<float>()[i] = static_cast<float>(v); break;
    case DType::kFloat16: as<Half>()[i] = Half::from_float(static_cast<float>(v)); break;
    case DType::kBFloat16: as<BFloat16>()[i] = BFloat16::from_float(static_cast<float>(v)); break;
    case DType::kBool: as<std::uint8_t>()[i] = v != 0 ? 1 : 0; break;
  }
}

Tensor Tensor::row(std::size_t k) const {
  require_memory();
  if (shape_.empty() || k >= static_cast<std::size_t>(shape_[0])) throw std::out_of_range("Tensor::row: no such row");
  Tensor r(dtype_, std::vector<std::int64_t>(shape_.begin() + 1, shape_.end()));
  if (r.bytes()) std::memcpy(r.data(), static_cast<const std::byte*>(data()) + k * r.bytes(), r.bytes());
  return r;
}

Tensor Tensor::of(DType dtype, const std::vector<double>& values) {
  Tensor t(dtype, {static_cast<std::int64_t>(values.size())});
  for (std::size_t i = 0; i < values.size(); ++i) t.set(i, values[i]);
  return t;
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

// torch's _Formatter (torch/_tensor_str.py), with its default print
// options (precision 4): how a tensor's values are written and padded.
class TorchFormatter {
 public:
  // Over every element of t, or only those at `only` (torch's summarized
  // data, when it prints a large tensor with "...").
  explicit TorchFormatter(const Tensor& t, const std::vector<std::size_t>* only = nullptr)
      : floating_(is_floating(t.dtype())), bool_(t.dtype() == DType::kBool) {
    std::vector<std::size_t> all;
    if (!only) {
      all.resize(t.count());
      for (std::size_t i = 0; i < t.count(); ++i) all[i] = i;
      only = &all;
    }
    if (!floating_) {
      for (std::size_t i : *only) width_ = std::max(width_, plain(t, i).size());
      return;
    }
    double lo = 0, hi = 0;
    bool any = false;
    for (std::size_t i : *only) {
      const double v = t.get(i);
      if (!std::isfinite(v) || v == 0) continue;
      const double a = std::fabs(v);
      lo = any ? std::min(lo, a) : a;
      hi = any ? std::max(hi, a) : a;
      any = true;
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (!any) return;  // nothing finite and nonzero: defaults
    if (int_mode_) {
      sci_ = hi / lo > 1000.0 || hi > 1.0e8;
    } else {
      sci_ = hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4;
    }
    for (std::size_t i : *only) {
      const double v = t.get(i);
      if (!std::isfinite(v) || v == 0) continue;
      std::string s = sci_ ? printf_text("%.4e", v) : int_mode_ ? printf_text("%.0f", v) : printf_text("%.4f", v);
      width_ = std::max(width_, s.size() + (!sci_ && int_mode_ ? 1 : 0));
    }
  }

  std::size_t width() const { return width_; }

  std::string format(const Tensor& t, std::size_t i) const {
    std::string r;
    if (!floating_) {
      r = plain(t, i);
    } else {
      const double v = t.get(i);
      if (std::isnan(v)) r = "nan";
      else if (std::isinf(v)) r = v > 0 ? "inf" : "-inf";
      else if (sci_) r = printf_text("%.4e", v);
      else if (int_mode_) r = printf_text("%.0f", v) + ".";
      else r = printf_text("%.4f", v);
    }
    return std::string(width_ > r.size() ? width_ - r.size() : 0, ' ') + r;
  }

 private:
  static std::string printf_text(const char* f, double v) {
    char buf[512];  // %.0f of the largest double has 309 digits
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
  }
  std::string plain(const Tensor& t, std::size_t i) const {
    if (bool_) return t.get(i) != 0 ? "True" : "False";
    if (t.dtype() == DType::kInt64) return std::to_string(t.get_int(i));
    return std::to_string(static_cast<long long>(t.get(i)));
  }

  bool floating_, bool_;
  bool int_mode_ = true;
  bool sci_ = false;
  std::size_t width_ = 1;
};

Tensor single(const Tensor& t, std::size_t i) {
  Tensor one(t.dtype(), {1});
  std::memcpy(one.data(), static_cast<const std::byte*>(t.data()) + i * dtype_size(t.dtype()), dtype_size(t.dtype()));
  return one;
}

}  // namespace

// torch names every dtype but the defaults it infers (float32, int64, bool).
std::string dtype_suffix(DType t) {
  if (t == DType::kFloat32 || t == DType::kInt64 || t == DType::kBool) return "";
  return ", dtype=torch." + std::string(dtype_name(t));
}

std::string format_element(const Tensor& t, std::size_t i) {
  const Tensor one = single(t, i);
  return "tensor(" + TorchFormatter(one).format(one, 0) + dtype_suffix(t.dtype()) + ")";
}

namespace {

// torch's print options (torch/_tensor_str.py's defaults).
constexpr std::size_t kLineWidth = 80;
constexpr std::size_t kThreshold = 1000;  // more elements than this: summarized
constexpr std::size_t kEdgeItems = 3;     // kept at each end of a summarized dimension

// torch's _tensor_str over a row-major tensor: the sub-tensor of dims
// [d, ndim) starting at element `base`, at `indent`.
struct TensorText {
  const Tensor& t;
  const TorchFormatter* f;  // null when only summarized() is used
  bool summarize;

  std::size_t stride(std::size_t d) const {
    std::size_t n = 1;
    for (std::size_t k = d + 1; k < t.shape().size(); ++k) n *= static_cast<std::size_t>(t.shape()[k]);
    return n;
  }
  // The indices along a dimension of `n` that are shown; SIZE_MAX marks "...".
  std::vector<std::size_t> shown(std::size_t n) const {
    std::vector<std::size_t> out;
    if (summarize && n > 2 * kEdgeItems) {
      for (std::size_t i = 0; i < kEdgeItems; ++i) out.push_back(i);
      out.push_back(SIZE_MAX);
      for (std::size_t i = n - kEdgeItems; i < n; ++i) out.push_back(i);
    } else {
      for (std::size_t i = 0; i < n; ++i) out.push_back(i);
    }
    return out;
  }
  std::string vector(std::size_t base, std::size_t indent) const {
    const std::size_t n = static_cast<std::size_t>(t.shape().back());
    std::vector<std::string> data;
    for (std::size_t i : shown(n)) data.push_back(i == SIZE_MAX ? " ..." : f->format(t, base + i));
    const std::size_t element = f->width() + 2;
    const std::size_t per_line = std::max<std::size_t>(1, (kLineWidth > indent ? kLineWidth - indent : 0) / element);
    std::string out = "[";
    for (std::size_t k = 0; k < data.size(); ++k) {
      if (k) out += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += data[k];
    }
    return out + "]";
  }
  std::string text(std::size_t d, std::size_t base, std::size_t indent) const {
    const std::size_t dims = t.shape().size();
    if (d + 1 == dims) return vector(base, indent);
    const std::string sep = "," + std::string(dims - d - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    bool first = true;
    for (std::size_t i : shown(static_cast<std::size_t>(t.shape()[d]))) {
      if (!first) out += sep;
      first = false;
      out += i == SIZE_MAX ? "..." : text(d + 1, base + i * stride(d), indent + 1);
    }
    return out + "]";
  }
  // torch's get_summarized_data: the elements a summarized print shows.
  void summarized(std::size_t d, std::size_t base, std::vector<std::size_t>& out) const {
    for (std::size_t i : shown(static_cast<std::size_t>(t.shape()[d]))) {
      if (i == SIZE_MAX) continue;
      if (d + 1 == t.shape().size()) out.push_back(base + i);
      else summarized(d + 1, base + i * stride(d), out);
    }
  }
};

// torch's _add_suffixes: ", dtype=..." on the last line, or on a line of
// its own when the last line would pass the line width.
std::string with_suffixes(std::string s, const std::vector<std::string>& suffixes, std::size_t indent) {
  // As torch counts it: len(s) - s.rfind("\n") + 1, with rfind -1 when none.
  const std::size_t nl = s.rfind('\n');
  std::size_t last_line = nl == std::string::npos ? s.size() + 2 : s.size() - nl + 1;
  for (const std::string& x : suffixes) {
    if (last_line + x.size() + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + x;
      last_line = indent + x.size();
    } else {
      s += ", " + x;
      last_line += x.size() + 2;
    }
  }
  return s + ")";
}

}  // namespace

std::string format_tensor(const Tensor& t) {
  const std::string prefix = "tensor(";
  std::vector<std::string> suffixes;
  if (t.count() == 0) {
    // torch shows an empty tensor's shape unless it is (0,), and its dtype
    // unless it is the default (float32): there is no element to infer it from.
    if (t.shape().size() != 1) {
      std::string dims;
      for (std::int64_t d : t.shape()) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      suffixes.push_back("size=(" + dims + ")");
    }
    if (t.dtype() != DType::kFloat32) suffixes.push_back("dtype=torch." + std::string(dtype_name(t.dtype())));
    return with_suffixes(prefix + "[]", suffixes, prefix.size());
  }
  const std::string suffix = dtype_suffix(t.dtype());
  if (!suffix.empty()) suffixes.push_back(suffix.substr(2));  // without ", "
  if (t.shape().empty()) return with_suffixes(prefix + TorchFormatter(t).format(t, 0), suffixes, prefix.size());
  // The formatter's widths come from what is shown: every element, or a
  // summarized tensor's edges.
  const bool summarize = t.count() > kThreshold;
  std::vector<std::size_t> edges;
  if (summarize) TensorText{t, nullptr, true}.summarized(0, 0, edges);
  const TorchFormatter f(t, summarize ? &edges : nullptr);
  const std::string body = TensorText{t, &f, summarize}.text(0, 0, prefix.size());
  return with_suffixes(prefix + body, suffixes, prefix.size());
}

std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e16) {
    std::ostringstream os;
    os.precision(1);
    os << std::fixed << v;
    return os.str();
  }
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_item(const Tensor& t, std::size_t i) {
  if (t.dtype() == DType::kBool) return t.get(i) != 0 ? "True" : "False";
  if (is_floating(t.dtype())) return python_float(t.get(i));
  if (t.dtype() == DType::kInt64) return std::to_string(t.get_int(i));
  return std::to_string(static_cast<long long>(t.get(i)));
}

}  // namespace collie
