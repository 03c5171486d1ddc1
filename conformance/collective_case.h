// Collective cases: one collective call on a job, described by a value
// (op, group, dtype, count, root, reduce op, algorithm, form, data seed),
// drawn at random or written by hand, and the inputs it gets.
//
// Inputs are generated from data_seed so that every result is exact in any
// combination order (as nccl-tests does): small integers for floating SUM,
// AVG, MIN and MAX; {-2,-1,1,2} for floating PRODUCT; any bits for integer
// types (wrapping arithmetic is order-independent); 0/1 for bool. With
// special_values, each floating element draws from one class for every
// rank -- signed zeros; NaNs among small values; infinities among small
// values; subnormals; small values; one infinity or signed zero on every
// rank (MAX of -inf everywhere) -- and collie's core must give the
// oracle's bits (its canonical NaN, -0.0 below +0.0 for MIN/MAX); another
// implementation whose NaN or zero bits differ gets a note, not a failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/view_layout.h"
#include "core/algorithm.h"
#include "core/executor.h"
#include "core/frame.h"
#include "core/op.h"
#include "core/reduce_op.h"
#include "core/tensor.h"
#include "sim/prng.h"

namespace collie::conformance {

struct CollectiveCase {
  CollectiveKind op = CollectiveKind::kAllReduce;
  std::vector<int> group;             // global ranks, any order; empty: the world
  DType dtype = DType::kFloat32;
  std::size_t count = 1;              // elements per rank (per list entry; reduce_scatter's output)
  int root = 0;                       // global rank; broadcast/reduce/scatter/gather
  ReduceOp reduce_op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  std::uint64_t data_seed = 1;
  // Floating inputs also hold signed zeros, NaNs of both signs (quiet and
  // signalling, with and without payloads), infinities and subnormals, mixed
  // so that every result is still exact in any order of combination.
  bool special_values = false;
  // Floating inputs with every mantissa bit of their dtype in use (17
  // significant bits, magnitudes 1/8 .. 16, both signs; PRODUCT 1/4 .. 4), so that sums and
  // products need rounding: with two contributors one rounding, the same in
  // any order, so the result is checked exactly (a bfloat16 SUM that
  // truncates instead of rounding to nearest even fails). A collective that
  // reduces nothing is checked exactly whatever the contributors.
  bool rounding = false;
  // The one-tensor form: all_gather_into_tensor, reduce_scatter_tensor,
  // all_to_all_single (instead of all_gather, reduce_scatter, all_to_all).
  bool tensor_form = false;
  // all_to_all: each pair's block has its own size, 0 .. 2 * count
  // (all_to_all_single passes split sizes), whole rows when `row` is set.
  bool uneven = false;
  // Uneven all_to_all: the group rank that sends nothing (every block it
  // sends is empty, itself included) yet receives, and the one that
  // receives nothing yet sends; -1: none.
  int silent_sender = -1;
  int silent_receiver = -1;
  // The async form (torch's async_op=True: the library's nonblocking call,
  // waited for later) instead of the blocking one.
  bool async_op = false;
  // async_op: each rank polls the handle's is_completed() (MPI_Test) until
  // it says done, for up to kPollNs, before it waits, as a program spinning
  // on it does; an op that completes only inside wait() fails. Only for
  // calls every member issues at once (nobody late).
  bool polled = false;
  static constexpr Nanos kPollNs = 5'000'000'000;
  // Two-dimensional tensors of rows of `row` elements (count and every
  // block a whole number of rows), as a program shapes them; 0: 1-D; -1
  // with count 1: 0-d scalars (a loss, a step count).
  std::int64_t row = 0;
  // Process backends hand the library non-contiguous views of the tensors
  // (JobOptions::views); the values are the same.
  ViewLayout views = ViewLayout::kContiguous;
  // Every contributor negative (integer and floating dtypes; unsigned ones
  // keep their usual inputs): a MIN or MAX that starts from 0 shows.
  bool negative = false;
  // Integer inputs at their dtype's edges (int8 -128, -127, -1, 0, 1, 126,
  // 127; uint8 0, 1, 127, 128, 129, 254, 255; the int32/int64 extremes;
  // bool 0/1): wrapping, sign and width mistakes show. Floating dtypes
  // keep their usual inputs.
  bool edges = false;
  // Global rank that issues this call late_ns (its executor's clock) after
  // the calls before it: a barrier must hold every other member until it
  // enters.
  int late_rank = -1;
  Nanos late_ns = 0;

  // "all_reduce(float32 x 5, SUM, ring) on {0,2,3} data_seed 1 async";
  // without the algorithm for an implementation that picks its own (a
  // library: collie's algorithm would mislabel it). Given the group's size,
  // an uneven all_to_all lists its split sizes.
  std::string describe(bool with_algorithm = true, int group_size = 0) const;
  // The op of core/op.h's table the case calls: the collective in its list
  // or its one-tensor form.
  OpKind op_kind() const;
};

// A case of `kind` (a collective of the table, in its list or one-tensor
// form): op and tensor_form set, the rest default.
CollectiveCase case_of(OpKind kind);

// `c` blocking, then the same call async at `async_root`, its data seed
// `seed_step` on (its own data).
std::vector<CollectiveCase> then_async(const CollectiveCase& c, int async_root, std::uint64_t seed_step);

// A random case of `op` for a world of `world` ranks, drawn from `prng`:
// random group (the world half the time), dtype, supported reduce op, count
// (0, 1, primes, up to a few thousand), root, algorithm (or auto), the list
// or the tensor form, and for all_to_all even or uneven blocks. `deep`
// cases also draw counts below the world size and from 64 Ki to several
// MiB (odd sizes), capped so that the whole job holds at most 2^25
// elements.
CollectiveCase random_case(CollectiveKind op, int world, sim::Prng& prng, bool deep = false);

// Elements group rank `from` sends group rank `to` in an all_to_all case.
std::size_t block_count(const CollectiveCase& c, int from, int to);

// The value generator used for inputs (exposed for tests of the oracle).
void fill_inputs(Tensor& t, const CollectiveCase& c, int group_rank, int list_index);

}  // namespace collie::conformance
