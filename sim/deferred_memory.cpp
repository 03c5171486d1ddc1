#include "sim/deferred_memory.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>

#include "sim/streaming_copy.h"

namespace collie::sim {

DeferredMemory::DeferredMemory(DeferredMemoryOptions options)
    : options_(options), period_(options.column_bytes * options.columns) {
  if (options_.column_bytes == 0 || options_.column_bytes % 64 != 0 || options_.columns == 0)
    throw std::invalid_argument("DeferredMemory: column_bytes must be a positive multiple of 64, columns positive");
  starts_.resize(options_.columns);
  ends_.resize(options_.columns);
}

DeferredMemory::~DeferredMemory() = default;

bool DeferredMemory::aligned(const std::byte* dst, const std::byte* src, std::size_t element_bytes) const {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  if (d % element_bytes != 0) return false;
  if (!src) return true;
  return d % period_ == reinterpret_cast<std::uintptr_t>(src) % period_;
}

void DeferredMemory::run(const Op& op, std::byte* dst, const std::byte* src, std::size_t bytes) {
  switch (op.kind) {
    case Kind::kCopy:
      streaming_copy(dst, src, bytes);
      return;
    case Kind::kReduce:
      reduce_host_in_cache(dst, src, bytes / dtype_size(op.dtype), op.dtype, op.op);
      return;
    case Kind::kAverage:
      finish_average_host(dst, bytes / dtype_size(op.dtype), op.dtype, op.divisor);
      return;
  }
}

void DeferredMemory::log(const Op& op) {
  if (op.bytes == 0) return;
  const std::size_t element = op.kind == Kind::kCopy ? 1 : dtype_size(op.dtype);
  const bool overlaps = op.src && op.src != op.dst && op.src < op.dst + op.bytes && op.dst < op.src + op.bytes;
  if (overlaps || !aligned(op.dst, op.src, element)) {
    flush();
    ++counts_.immediate;
    run(op, op.dst, op.src, op.bytes);
    return;
  }
  const auto index = static_cast<std::uint32_t>(ops_.size());
  const std::size_t cb = options_.column_bytes;
  const std::size_t columns = options_.columns;
  const auto d = reinterpret_cast<std::uintptr_t>(op.dst);
  Op& o = ops_.emplace_back(op);
  o.first_block = d / cb;
  o.first_column = static_cast<std::uint32_t>(o.first_block % columns);
  ++counts_.logged;
  const std::uintptr_t blocks = (d + op.bytes - 1) / cb - o.first_block + 1;
  // Columns [first, first + n), wrapping round: where flush() holds the op active.
  const std::size_t n = static_cast<std::size_t>(std::min<std::uintptr_t>(blocks, columns));
  const std::size_t first = o.first_column;
  starts_[first].push_back(index);
  if (first + n < columns) {
    ends_[first + n].push_back(index);
  } else if (first + n > columns) {
    active_at_zero_.push_back(index);
    ends_[first + n - columns].push_back(index);
  }
  if (ops_.size() >= options_.max_ops) flush();
}

void DeferredMemory::copy(void* dst, const void* src, std::size_t bytes) {
  log(Op{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes, 0, Kind::kCopy, DType::kUInt8,
         ReduceOp::kSum});
}

void DeferredMemory::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  log(Op{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), count * dtype_size(dtype), 0, Kind::kReduce,
         dtype, op});
}

void DeferredMemory::finish_average(void* dst, std::size_t count, DType dtype, int divisor) {
  log(Op{static_cast<std::byte*>(dst), nullptr, count * dtype_size(dtype), divisor, Kind::kAverage, dtype,
         ReduceOp::kSum});
}

void DeferredMemory::retain(std::shared_ptr<const void> memory, std::size_t bytes) {
  retained_.push_back(std::move(memory));
  retained_bytes_ += bytes;
  if (retained_bytes_ >= options_.max_retained_bytes) flush();
}

void DeferredMemory::flush() {
  if (!ops_.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    ++counts_.flushes;
    const std::size_t cb = options_.column_bytes;
    const std::size_t columns = options_.columns;
    // Sweep the columns in order, holding the set of ops active in the
    // current one as a bitmap over the log: its bits in ascending order are
    // the ops in issued order.
    std::vector<std::uint64_t> active((ops_.size() + 63) / 64, 0);
    auto set = [&](std::uint32_t i) { active[i / 64] |= std::uint64_t{1} << (i % 64); };
    for (const std::uint32_t i : active_at_zero_) set(i);
    std::vector<std::uint32_t> now;  // the current column's, in issued order
    for (std::size_t c = 0; c < columns; ++c) {
      for (const std::uint32_t i : ends_[c]) active[i / 64] &= ~(std::uint64_t{1} << (i % 64));
      for (const std::uint32_t i : starts_[c]) set(i);
      ends_[c].clear();
      starts_[c].clear();
      now.clear();
      for (std::size_t w = 0; w < active.size(); ++w)
        for (std::uint64_t bits = active[w]; bits != 0; bits &= bits - 1)
          now.push_back(static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits))));
      for (std::size_t k = 0; k < now.size(); ++k) {
        // The log is larger than the caches by now: ask for the entries ahead.
        if (k + 8 < now.size()) __builtin_prefetch(&ops_[now[k + 8]]);
        const Op& op = ops_[now[k]];
        const auto d = reinterpret_cast<std::uintptr_t>(op.dst);
        const std::uintptr_t end = d + op.bytes;
        const auto s = reinterpret_cast<std::uintptr_t>(op.src);
        // The op's first block in column c.
        std::uintptr_t b = op.first_block + (c >= op.first_column ? c - op.first_column : c + columns - op.first_column);
        for (; b * cb < end; b += columns) {
          const std::uintptr_t from = std::max<std::uintptr_t>(d, b * cb);
          const std::uintptr_t to = std::min<std::uintptr_t>(end, (b + 1) * cb);
          run(op, reinterpret_cast<std::byte*>(from), op.src ? reinterpret_cast<const std::byte*>(s + (from - d)) : nullptr,
              static_cast<std::size_t>(to - from));
          ++counts_.pieces;
        }
      }
    }
    active_at_zero_.clear();
    ops_.clear();
    counts_.flush_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  retained_.clear();
  retained_bytes_ = 0;
}

}  // namespace collie::sim
