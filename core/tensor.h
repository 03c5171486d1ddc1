// Tensors as the core sees them.
//
// TensorView is what every op takes: a pointer, a dtype and an element count,
// plus where the memory lives. It does not own memory. The caller keeps the
// memory alive and unmodified (for sends) / untouched (for receives) until the
// op's Work completes -- the same contract as torch.distributed's async ops.
// A view of a tensor with two or more dimensions also names its shape, so
// that an adapter to a library hands it a tensor shaped as the program's
// (the ops themselves read count only).
//
// Tensor is a small owning host tensor with a shape, used by examples,
// scenarios and tests. Ops only ever see its view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace collie {

enum class MemorySpace : std::uint8_t { kHost = 0, kDevice = 1 };

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::size_t count = 0;  // elements
  MemorySpace space = MemorySpace::kHost;
  // The owner's dimensions when it has two or more, or none at all (a 0-d
  // scalar: `shape` set, dims 0), else null (1-D): they point into the
  // owning Tensor and are read only while the op is issued (the owner is
  // alive then). Slices are 1-D.
  const std::int64_t* shape = nullptr;
  std::uint8_t dims = 0;

  std::size_t bytes() const { return count * dtype_size(dtype); }
  std::byte* byte_data() const { return static_cast<std::byte*>(data); }
  // Elements [first, first + n) as a view; requires first + n <= count.
  TensorView slice(std::size_t first, std::size_t n) const {
    return TensorView{byte_data() + first * dtype_size(dtype), dtype, n, space};
  }
};

class Tensor {
 public:
  Tensor() = default;
  // A zero-filled host tensor. Throws std::invalid_argument for a negative
  // dimension and std::length_error when the elements' bytes overflow
  // (the product of the dimensions is checked, not only each).
  Tensor(DType dtype, std::vector<std::int64_t> shape);
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape) {
    return Tensor(dtype, std::move(shape));
  }
  // A 1-D tensor holding `values`, each converted as set() converts it.
  static Tensor of(DType dtype, const std::vector<double>& values);
  // A tensor with a dtype and shape but no memory, for timing-only
  // simulation (sim/simulator.h): its view's data is null, and get()/set()
  // throw std::logic_error.
  static Tensor phantom(DType dtype, std::vector<std::int64_t> shape);
  // A zero-filled host tensor whose first element lies `head_bytes` past
  // the start of its 64-byte aligned allocation: head_bytes % 64 sets its
  // address's alignment (a multiple of the dtype's size keeps it aligned
  // as its elements; anything else is the caller's to want), and head()
  // spans the bytes before it. Throws as the constructor does, and
  // std::length_error for a head over 4 KiB.
  static Tensor with_head(DType dtype, std::vector<std::int64_t> shape, std::size_t head_bytes);
  bool materialized() const { return storage_ != nullptr; }

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t count() const { return count_; }
  std::size_t bytes() const { return count_ * dtype_size(dtype_); }
  void* data() { return storage_ ? storage_.get() + head_bytes_ : nullptr; }
  const void* data() const { return storage_ ? storage_.get() + head_bytes_ : nullptr; }
  // The allocation's bytes past the last element -- at least 64, and up to
  // the next multiple of 64 beyond that -- that belong to no element (empty
  // for a phantom). Zero unless someone writes there: a process that hands
  // this tensor's memory to a library can fill them with a pattern and see
  // whether the library wrote past the end.
  std::span<std::byte> slack() {
    if (!storage_) return {};
    const std::size_t used = head_bytes_ + bytes();
    return {storage_.get() + used, allocation_bytes(used) - used};
  }
  // The allocation's bytes before the first element (with_head's; empty
  // otherwise), zero unless someone writes there: as slack(), for a write
  // before the start.
  std::span<std::byte> head() {
    if (!storage_) return {};
    return {storage_.get(), head_bytes_};
  }

  TensorView view() {
    TensorView v{data(), dtype_, count_, MemorySpace::kHost};
    if (shape_.size() >= 2 && shape_.size() <= 255) {
      v.shape = shape_.data();
      v.dims = static_cast<std::uint8_t>(shape_.size());
    } else if (shape_.empty()) {
      static constexpr std::int64_t kNoDimensions = 0;
      v.shape = &kNoDimensions;  // a 0-d tensor
    }
    return v;
  }
  operator TensorView() { return view(); }  // NOLINT: a tensor is usable wherever a view is

  // Element i converted to double (bool -> 0/1, float16/bfloat16 widened).
  double get(std::size_t i) const;
  // Stores v converted to the dtype (rounded to nearest for float16/bfloat16,
  // truncated toward zero and wrapped for integers, v != 0 for bool).
  void set(std::size_t i, double v);
  // Exact integer access for int64 values that do not fit a double.
  // get_int: element i of an integer or bool dtype. set_int: v wrapped
  // modulo 2^bits into an integer dtype, rounded once to nearest into a
  // floating one (as torch converts an int64), v != 0 for bool.
  std::int64_t get_int(std::size_t i) const;
  void set_int(std::size_t i, std::int64_t v);

  // Row k of dimension 0 as a tensor of its own (a copy, shaped as the
  // remaining dimensions): torch's t[k]. Requires k < shape()[0].
  Tensor row(std::size_t k) const;

  template <typename T>
  T* as() { return static_cast<T*>(data()); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data()); }

  std::span<const std::byte> byte_span() const {
    return {static_cast<const std::byte*>(data()), bytes()};
  }

 private:
  // What the constructor allocates for `bytes` bytes of elements.
  static std::size_t allocation_bytes(std::size_t bytes) { return (bytes + 63) / 64 * 64 + 64; }

  Tensor(DType dtype, std::vector<std::int64_t> shape, bool allocate, std::size_t head_bytes = 0);
  void require_memory() const;

  DType dtype_ = DType::kFloat32;
  std::vector<std::int64_t> shape_;
  std::size_t count_ = 0;
  std::size_t head_bytes_ = 0;  // the allocation's bytes before element 0
  std::shared_ptr<std::byte[]> storage_;
};

// Formats a value as torch prints a scalar of this dtype: "1.0", "4", "True".
std::string format_scalar(DType dtype, double v);

// Python's repr of a float ("4.0", "0.1", "1e-05", "nan", "-inf").
std::string python_float(double v);

// Element i as Python prints t[i].item(): "4.0", "0.1", "7", "True".
std::string format_item(const Tensor& t, std::size_t i);

// Formats element i like torch's repr of the 0-d tensor t[i]: "tensor(1.)",
// "tensor(4)", "tensor(True)".
std::string format_element(const Tensor& t, std::size_t i);

// Formats as torch's repr does with its default print options:
// "tensor([0., 1.])" for floats, "tensor([1, 2])" for integers; a tensor of
// two or more dimensions as nested rows, one per line, aligned under the
// first ("tensor([[1, 2],\n        [3, 4]])"); lines wrapped at 80
// characters; more than 1000 elements summarized with "..." (3 at each end
// of each dimension); the dtype unless torch infers it (float32, int64,
// bool), and an empty tensor's size and dtype.
std::string format_tensor(const Tensor& t);

}  // namespace collie
