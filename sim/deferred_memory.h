// DeferredMemory: the simulator's memory operations (copy, reduce,
// finish_average) logged as they are issued and carried out later, at
// flush(), in column order -- the way a device stream runs a kernel queue,
// and for the same reason: a simulated world holds every rank's tensors at
// once, far more than the caches, and an algorithm's step touches a little
// of each, so executing each step as it is issued streams the whole world
// through memory once per step.
//
// Columns: the address space is cut into blocks of column_bytes, and block
// k belongs to column k mod columns (so a column repeats every
// column_bytes * columns bytes, the period). flush() runs, for each column
// in turn, the part of every logged operation that writes into that column,
// in the order the operations were issued.
//
// Why that is the issued order's result: an operation is *aligned* when its
// destination and source lie the same distance into the period (dst - src
// is a multiple of it) and its destination is aligned for its element type.
// The part of an aligned operation that writes column c reads only column
// c, element by element at the same place; so columns never exchange bytes,
// and running one column's parts in issued order gives what running all of
// every operation in issued order gives. An operation that is not aligned
// is not logged: everything logged so far is run first, then it is run at
// once (correct, only not blocked). Nor is one whose source and destination
// overlap (run piece by piece, a shifted copy would read bytes it has
// already written).
//
// Contract for users: between an operation's issue and flush(), nobody but
// this log reads or writes the bytes it names, and they stay allocated
// (the simulator frees its own scratch memory only after a flush).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/reduce_op.h"

namespace collie::sim {

struct DeferredMemoryOptions {
  // Width of one block of a column; a multiple of 64 (a cache line).
  std::size_t column_bytes = 4096;
  // Columns per period. column_bytes * columns should divide the distance
  // between the tensors whose bytes operations move (e.g. one tensor size
  // apart in an arena) for their operations to be aligned.
  std::size_t columns = 256;
  // A flush happens by itself once this many operations are logged, or
  // this much retained memory waits for one.
  std::size_t max_ops = std::size_t{1} << 22;
  std::size_t max_retained_bytes = std::size_t{256} << 20;
};

class DeferredMemory {
 public:
  explicit DeferredMemory(DeferredMemoryOptions options = {});
  ~DeferredMemory();
  DeferredMemory(const DeferredMemory&) = delete;
  DeferredMemory& operator=(const DeferredMemory&) = delete;

  // As Transport::copy / reduce / finish_average, deferred to flush().
  void copy(void* dst, const void* src, std::size_t bytes);
  void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
  void finish_average(void* dst, std::size_t count, DType dtype, int divisor);
  // Keeps `memory` (`bytes` long) allocated until the next flush() has run.
  void retain(std::shared_ptr<const void> memory, std::size_t bytes);

  // Runs everything logged; afterwards memory holds what issuing the
  // operations at once would have left there, and the retained memory is
  // released.
  void flush();
  bool empty() const { return ops_.empty(); }

  // The period (column_bytes * columns): where an operation must put its
  // source, relative to its destination, to be logged.
  std::size_t period_bytes() const { return period_; }

  struct Counts {
    std::uint64_t logged = 0;     // operations logged
    std::uint64_t immediate = 0;  // operations run at once (not aligned)
    std::uint64_t flushes = 0;    // flushes that ran something
    std::uint64_t pieces = 0;     // column parts run
    double flush_s = 0;           // wall time spent running them
  };
  const Counts& counts() const { return counts_; }

 private:
  enum class Kind : std::uint8_t { kCopy, kReduce, kAverage };
  struct Op {
    std::byte* dst;
    const std::byte* src;  // null for kAverage
    std::uint64_t bytes;
    std::int32_t divisor;  // kAverage
    Kind kind;
    DType dtype;
    ReduceOp op;
    std::uint32_t first_column = 0;  // first_block % columns
    std::uint64_t first_block = 0;   // dst / column_bytes
  };
  bool aligned(const std::byte* dst, const std::byte* src, std::size_t element_bytes) const;
  void log(const Op& op);
  static void run(const Op& op, std::byte* dst, const std::byte* src, std::size_t bytes);

  DeferredMemoryOptions options_;
  std::size_t period_;
  std::vector<Op> ops_;
  // by column: the logged operations whose columns begin there, and those
  // whose columns ended just before; and those whose columns wrap round
  // past the last one (so that they are active in column 0).
  std::vector<std::vector<std::uint32_t>> starts_, ends_;
  std::vector<std::uint32_t> active_at_zero_;
  std::vector<std::shared_ptr<const void>> retained_;
  std::size_t retained_bytes_ = 0;
  Counts counts_;
};

}  // namespace collie::sim
