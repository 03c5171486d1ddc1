#include "conformance/decided_cases.h"

#include <algorithm>

#include "conformance/case_calls.h"
#include "conformance/targeted_checks.h"

namespace collie::conformance {

namespace {

// A group of six ranks' world named out of order, and a root that is
// neither rank 0 nor the group's first member (group rank 2).
const std::vector<int> kUnsorted = {5, 1, 4, 2};
constexpr int kUnsortedWorld = 6;
constexpr int kUnsortedRoot = 4;

bool takes_tensors(const OpSpec& s) {
  return std::any_of(s.operands.begin(), s.operands.end(), [](const Operand& o) { return o.present(); });
}

// The collectives of the table, in its order.
std::vector<OpKind> collectives() {
  std::vector<OpKind> out;
  for (const OpSpec& s : op_table())
    if (s.family == OpFamily::kCollective) out.push_back(s.kind);
  return out;
}

std::string name_of(OpKind k) { return std::string(op_spec(k).name); }


// The ops' reduce ops, taken in turn so that each reducing collective gets
// a different one somewhere.
ReduceOp reduce_op_for(std::size_t i) {
  static constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct};
  return kOps[i % std::size(kOps)];
}

DecidedCase decided(std::string feature, std::string name, int world) {
  DecidedCase d;
  d.feature = std::move(feature);
  d.name = std::move(name);
  d.world = world;
  return d;
}

DecidedCase collective(std::string feature, std::string name, int world, std::vector<CollectiveCase> cases) {
  DecidedCase d = decided(std::move(feature), std::move(name), world);
  d.cases = std::move(cases);
  return d;
}

DecidedCase targeted(std::string feature, std::string name, int world,
                     std::function<CaseOutcome(const RunOnEveryRank&, const std::string&, bool)> check) {
  DecidedCase d = decided(std::move(feature), std::move(name), world);
  d.check = std::move(check);
  return d;
}

void unsorted_groups_and_async_forms(std::vector<DecidedCase>& out) {
  const std::vector<OpKind> ops = collectives();
  for (bool async : {false, true}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpSpec& s = op_spec(ops[i]);
      if (async && !s.async) continue;  // monitored_barrier: blocking only
      CollectiveCase c = case_of(ops[i]);
      c.group = kUnsorted;
      c.root = kUnsortedRoot;
      // Polled before waited for (a library whose handle completed only
      // inside wait() passed: every case waited at once); the cases on the
      // world below wait at once. Large and odd when polled: an MPI_Test
      // that said a nonblocking collective was done one step early, its
      // last block not yet written, passed on 13 elements (52 bytes) --
      // 20,011 float32 are past the eager and segment sizes of libraries.
      c.count = async ? 20'011 : 13;
      c.reduce_op = reduce_op_for(i);
      c.async_op = async;
      c.polled = async;
      c.data_seed = 100 + i;
      out.push_back(collective(async ? "async_forms" : "unsorted_groups",
                               name_of(ops[i]) + (s.rooted ? "_root" + std::to_string(kUnsortedRoot) : ""),
                               kUnsortedWorld, {c}));
    }
  }
  // Every kind in flight at once on one group, waited for in order (an
  // MPI whose async collective started while another kind was pending on
  // the communicator never wrote its outputs: two kinds were never
  // outstanding together).
  {
    std::vector<CollectiveCase> all;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpSpec& s = op_spec(ops[i]);
      if (!s.async) continue;
      CollectiveCase c = case_of(ops[i]);
      c.group = kUnsorted;
      c.root = kUnsortedRoot;
      c.count = 11;
      c.reduce_op = reduce_op_for(i + 1);
      c.async_op = true;
      c.data_seed = 180 + i;
      all.push_back(c);
    }
    out.push_back(collective("async_forms", "every_kind_in_flight_at_once", kUnsortedWorld, std::move(all)));
  }
  // The async forms on the whole world too, the job's own (an MPI runs them
  // on MPI_COMM_WORLD: an MPI_Iallgather wrong there alone passed, every
  // other async case being on a communicator made for it).
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpSpec& s = op_spec(ops[i]);
    if (!s.async) continue;
    CollectiveCase c = case_of(ops[i]);
    c.root = 3;
    c.count = 13;
    c.reduce_op = reduce_op_for(i + 2);
    c.async_op = true;
    c.data_seed = 150 + i;
    out.push_back(collective("async_forms", name_of(ops[i]) + "_on_the_world" + (s.rooted ? "_root3" : ""), 5, {c}));
  }
}

void sizes(std::vector<DecidedCase>& out) {
  const std::vector<OpKind> ops = collectives();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!takes_tensors(op_spec(ops[i]))) continue;
    CollectiveCase c = case_of(ops[i]);
    c.dtype = DType::kInt32;
    c.count = 65539;
    c.root = 1;  // the middle of three (an MPI_Reduce that dropped a middle root's own part passed at root 2)
    c.reduce_op = reduce_op_for(i);
    c.data_seed = 200 + i;
    // Then async, rooted at the last rank (an MPI_Iallreduce wrong above 64
    // KiB on groups that are not a power of two passed: this was blocking),
    // in float32 (an MPI_Iallreduce of float32 wrong from 16 Ki elements on
    // passed: every async float32 case had 1,001 elements at most).
    std::vector<CollectiveCase> both = then_async(c, 2, 50);
    both[1].dtype = DType::kFloat32;
    out.push_back(collective("sizes", name_of(ops[i]) + "_65539", 3, std::move(both)));
  }
  // Groups of five: every other fixed case has four members or fewer, so a
  // library wrong only on group sizes that are odd and not powers of two
  // (an all_gather zeroing the last block on five or more ranks, a
  // reduce_scatter_block short-changing the last of an odd group) was
  // reached by random draws alone. A mid-sized odd count (past the small
  // messages' fast paths), blocking then async (its root the group's last
  // member).
  const std::vector<int> five = {6, 2, 0, 5, 3};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!takes_tensors(op_spec(ops[i]))) continue;
    CollectiveCase c = case_of(ops[i]);
    c.dtype = i % 2 ? DType::kFloat32 : DType::kInt64;
    c.count = 1001;
    c.group = five;
    c.root = 5;
    c.reduce_op = reduce_op_for(i + 1);
    c.data_seed = 300 + i;
    // Async at the last member (an MPI_Igather wrong there only passed).
    out.push_back(collective("sizes", name_of(ops[i]) + "_1001_on_five_of_seven", 7, then_async(c, 6, 50)));
  }
  // Six and seven members, the most any fixed case had being five: a
  // library's algorithms switch on the group's size (an MPI_Allgather
  // swapping two blocks on 6 ranks, an MPI_Reduce_scatter_block short-
  // changing the last of 7 passed). Six of seven out of order; then the
  // whole world of seven, the job's own (MPI_COMM_WORLD). Blocking with a
  // middle root, then async rooted at the last member.
  const std::vector<int> six = {6, 2, 0, 5, 3, 1};
  for (bool whole : {false, true}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (!takes_tensors(op_spec(ops[i]))) continue;
      CollectiveCase c = case_of(ops[i]);
      c.dtype = i % 2 ? DType::kInt64 : DType::kFloat32;
      c.count = 1001;
      if (!whole) c.group = six;
      c.root = whole ? 3 : 2;
      c.reduce_op = reduce_op_for(i + 3);
      c.data_seed = (whole ? 700 : 600) + i;
      // Async at a middle member on six (an MPI_Ireduce or MPI_Igather
      // that dropped a middle root's own part passed: every async root of a
      // group that is not a power of two was its last member), at the last
      // one on seven.
      out.push_back(collective("sizes", name_of(ops[i]) + (whole ? "_1001_on_seven" : "_1001_on_six_of_seven"), 7,
                               then_async(c, whole ? 6 : 3, 50)));
    }
  }
  // Eight and nine members, past every size above: a library's trees and
  // recursive halvings gain a level there (an MPI_Iallreduce, an
  // MPI_Allgather on powers of two from 8, an MPI_Reduce_scatter_block
  // swapping the last two blocks from 8, an MPI_Bcast from a middle root on
  // 9 were reached by random draws alone; a torch broadcast missing group
  // rank 8 of 9, a gather ordering members by their ranks as text, never
  // fired). The whole world of eight (a power of two), then nine of eleven
  // out of order, rank 10 among them; blocking at a middle root, then
  // async at another.
  const std::vector<int> nine = {10, 1, 8, 2, 0, 7, 3, 6, 4};
  for (bool of_eleven : {false, true}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (!takes_tensors(op_spec(ops[i]))) continue;
      CollectiveCase c = case_of(ops[i]);
      c.dtype = i % 2 ? DType::kFloat32 : DType::kInt32;
      c.count = 1001;
      if (of_eleven) c.group = nine;
      c.root = 4;
      c.reduce_op = reduce_op_for(i + 1);
      c.data_seed = (of_eleven ? 1700 : 1600) + i;
      out.push_back(collective("sizes", name_of(ops[i]) + (of_eleven ? "_1001_on_nine_of_eleven" : "_1001_on_eight"),
                               of_eleven ? 11 : 8, then_async(c, of_eleven ? 10 : 5, 50)));
    }
  }
  // Sizes that are exact powers of two (16 and 256 KiB of float32) on
  // three ranks, blocking then async: every large case had an odd count,
  // and an MPI_Iallreduce that left its last 8 KiB segment unreduced when
  // the size was a whole number of segments passed.
  for (OpKind k : {OpKind::kAllReduce, OpKind::kBroadcast, OpKind::kReduceScatterTensor, OpKind::kAllGather}) {
    for (std::size_t count : {std::size_t{4096}, std::size_t{65536}}) {
      CollectiveCase c = case_of(k);
      c.dtype = DType::kFloat32;
      c.count = count;
      c.root = 1;
      c.data_seed = 1900 + count % 1000 + static_cast<std::size_t>(k);
      out.push_back(collective("sizes", name_of(k) + "_" + std::to_string(count), 3, then_async(c, 2, 50)));
    }
  }
  // Fewer elements than members (3 on five of seven), blocking then async:
  // a library splitting a vector into one piece per member has empty
  // pieces there (an MPI_Iallreduce leaving the last rank's last element
  // its own input passed: the one async case below a member per element
  // had 1 element on 4).
  // `count` elements of `dtype` through every collective that takes tensors
  // on five of seven, blocking at `root`, then async at `async_root`.
  auto on_five_of_seven = [&](const std::string& suffix, DType dtype, std::size_t count, int root, int async_root,
                              std::size_t op_shift, std::uint64_t seed) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (!takes_tensors(op_spec(ops[i]))) continue;
      CollectiveCase c = case_of(ops[i]);
      c.dtype = dtype;
      c.count = count;
      c.group = five;
      c.root = root;
      c.reduce_op = reduce_op_for(i + op_shift);
      c.data_seed = seed + i;
      out.push_back(collective("sizes", name_of(ops[i]) + suffix, 7, then_async(c, async_root, 50)));
    }
  };
  on_five_of_seven("_3_on_five_of_seven", DType::kInt32, 3, 0, 5, 2, 1800);
  // Empty tensors there (an MPI refusing count 0 from four members on
  // passed: every empty collective had three members or fewer).
  on_five_of_seven("_empty_on_five_of_seven", DType::kFloat32, 0, 2, 3, 3, 2000);
  // Seventeen members, past every size above (a library's trees gain a
  // level from 16; a peer table of 16 sends rank 16's frames to rank 0; an
  // MPI_Allreduce wrong from 16 members passed: the largest fixed group had
  // 13): every collective and the barrier on the whole world of 17 -- no
  // group to make, which costs a library's 17 processes a rendezvous each
  // case -- blocking at a middle root, then async at its last rank.
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!takes_tensors(op_spec(ops[i])) && ops[i] != OpKind::kBarrier) continue;
    CollectiveCase c = case_of(ops[i]);
    c.dtype = i % 2 ? DType::kInt32 : DType::kFloat32;
    c.count = 257;
    c.root = 9;
    c.reduce_op = reduce_op_for(i);
    c.data_seed = 2100 + i;
    out.push_back(collective("sizes", name_of(ops[i]) + "_257_on_seventeen", 17, then_async(c, 16, 50)));
  }
}

void layouts(std::vector<DecidedCase>& out) {
  const std::vector<OpKind> ops = collectives();
  // 0-d scalars through the collectives that take one tensor per rank or a
  // list of them (the tensor forms concatenate, which a scalar cannot):
  // what a training loop reduces most (an all_reduce that reduced nothing on
  // a 0-d tensor passed every 1-D and 2-D case).
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpSpec& s = op_spec(ops[i]);
    if (!takes_tensors(s)) continue;
    CollectiveCase c = case_of(ops[i]);
    if (c.tensor_form) continue;
    c.dtype = DType::kFloat32;
    c.count = 1;
    c.row = -1;
    c.root = 1;
    c.reduce_op = reduce_op_for(i);
    c.data_seed = 350 + i;
    out.push_back(collective("layouts", name_of(ops[i]) + "_0d", 3, {c}));
  }
  // Pitched views (rows of a wider buffer, stride(-1) 1): a library that
  // judged contiguity by the last stride alone read and wrote them as dense
  // memory, and only every-other-element views were handed over.
  for (ViewLayout views : {ViewLayout::kContiguous, ViewLayout::kStrided, ViewLayout::kPitched}) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (!takes_tensors(op_spec(ops[i]))) continue;
      CollectiveCase c = case_of(ops[i]);
      c.dtype = DType::kFloat64;
      c.count = 21;
      c.row = 3;
      c.root = 1;
      c.views = views;
      c.reduce_op = reduce_op_for(i);
      c.data_seed = 300 + i + (views == ViewLayout::kPitched ? 40 : 0);
      const std::string layout = views == ViewLayout::kContiguous ? "" : std::string("_") + view_layout_name(views);
      DecidedCase d = collective("layouts", name_of(ops[i]) + "_2d" + layout, 3, {c});
      d.views = views;
      out.push_back(std::move(d));
    }
  }
}

// The first data seed from `seed` on whose uneven blocks some group rank's
// input and output splits differ and some block is empty.
std::uint64_t differing_splits(CollectiveCase c, int n, std::uint64_t seed) {
  for (;; ++seed) {
    c.data_seed = seed;
    bool differ = false, empty = false;
    for (int g = 0; g < n; ++g)
      for (int i = 0; i < n; ++i) {
        differ = differ || block_count(c, g, i) != block_count(c, i, g);
        empty = empty || block_count(c, g, i) == 0;
      }
    if (differ && empty) return seed;
  }
}

void uneven_all_to_all(std::vector<DecidedCase>& out) {
  const std::vector<int> named = {4, 0, 3, 1};
  for (bool tensor_form : {true, false}) {
    for (std::int64_t row : {0, 4}) {
      CollectiveCase c;
      c.op = CollectiveKind::kAllToAll;
      c.tensor_form = tensor_form;
      c.uneven = true;
      c.group = named;
      c.count = row ? 12 : 5;
      c.row = row;
      c.dtype = DType::kInt64;
      c.data_seed = differing_splits(c, static_cast<int>(named.size()), 400 + static_cast<std::uint64_t>(row));
      out.push_back(collective("uneven_all_to_all",
                               std::string(tensor_form ? "single" : "list") + (row ? "_2d" : "_1d"), 5, {c}));
    }
    // Split sizes in 1- and 2-byte elements, odd blocks among them, blocking
    // then async (an all_to_all_single moving float16 as 32-bit words with
    // split sizes passed: every uneven case was int64; the even float16
    // cases had no splits).
    for (DType dt : {DType::kFloat16, DType::kInt8}) {
      CollectiveCase c;
      c.op = CollectiveKind::kAllToAll;
      c.tensor_form = tensor_form;
      c.uneven = true;
      c.group = named;
      c.count = 7;
      c.dtype = dt;
      c.data_seed = differing_splits(c, static_cast<int>(named.size()), 420 + static_cast<std::uint64_t>(dt));
      CollectiveCase async = c;
      async.async_op = true;
      async.data_seed = differing_splits(c, static_cast<int>(named.size()), c.data_seed + 1);
      out.push_back(collective("uneven_all_to_all",
                               std::string(tensor_form ? "single" : "list") + "_" + std::string(dtype_name(dt)), 5,
                               {c, async}));
    }
    // A member whose every input split is 0 while it still receives, and
    // one whose every output split is 0 while it still sends (an
    // MPI_Alltoallv that skipped a rank sending nothing -- receives and all
    // -- passed).
    for (const bool sender : {true, false}) {
      CollectiveCase c;
      c.op = CollectiveKind::kAllToAll;
      c.tensor_form = tensor_form;
      c.uneven = true;
      c.group = named;
      c.count = 5;
      c.dtype = DType::kInt64;
      (sender ? c.silent_sender : c.silent_receiver) = 1;
      c.data_seed = 410 + (sender ? 0u : 1u) + (tensor_form ? 2u : 0u);
      out.push_back(collective("uneven_all_to_all",
                               std::string(tensor_form ? "single" : "list") +
                                   (sender ? "_a_member_sends_nothing" : "_a_member_receives_nothing"),
                               5, {c}));
    }
  }
}

void reduce_edges(std::vector<DecidedCase>& out) {
  const std::vector<int> three = {3, 1, 2}, two = {3, 1};
  std::uint64_t seed = 500, wide_seed = 5000;
  for (OpKind k : collectives()) {
    const OpSpec& s = op_spec(k);
    if (!s.reduce_op) continue;
    auto call = [&](DType dt, ReduceOp op, const std::vector<int>& group) {
      CollectiveCase c = case_of(k);
      c.group = group;
      c.root = 3;
      c.dtype = dt;
      c.reduce_op = op;
      c.count = 37;
      c.data_seed = ++seed;
      return c;
    };
    std::vector<CollectiveCase> negative;
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt8})
      for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
        negative.push_back(call(dt, op, three));
        negative.back().negative = true;
      }
    out.push_back(collective("reduce_edges", name_of(k) + "_min_max_negative", 4, negative));
    std::vector<CollectiveCase> nan;
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kSum}) {
      nan.push_back(call(DType::kFloat32, op, three));
      nan.back().special_values = true;
      nan.back().count = 64;
    }
    out.push_back(collective("reduce_edges", name_of(k) + "_nan", 4, nan));
    // Two contributors: one rounding, the same in any order, checked exactly.
    std::vector<CollectiveCase> product;
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kInt32}) {
      product.push_back(call(dt, ReduceOp::kProduct, two));
      product.back().rounding = is_floating(dt);
    }
    out.push_back(collective("reduce_edges", name_of(k) + "_product_precision", 4, product));
    // One case per reduce op: a library's deviation in one (Open MPI's
    // saturating 8-bit SUM) must not hide another's (a uint8 MIN computing
    // MAX passed inside the same case, which had failed already). int32 and
    // int64 at their extremes too: an int64 MIN/MAX compared through double
    // (2^63 - 1 and 2^63 - 2 are one double) computed nothing wrong on any
    // other case's values.
    for (DType dt : {DType::kInt8, DType::kUInt8, DType::kBool, DType::kInt32, DType::kInt64}) {
      for (int op = 0; op < kNumReduceOps; ++op) {
        if (reduce_op_unsupported(static_cast<ReduceOp>(op), dt)) continue;
        CollectiveCase c = call(dt, static_cast<ReduceOp>(op), three);
        c.edges = true;
        // Past 64 elements, where a library's vector loop runs (an int64
        // MIN/MAX compared unsigned there only, and a uint8 one compared
        // signed, passed 37); int32 and int64 with seeds of their own (the
        // cases before them keep theirs).
        c.count = 131;
        if (dt == DType::kInt32 || dt == DType::kInt64) {
          --seed;
          c.data_seed = ++wide_seed;
        }
        out.push_back(collective("reduce_edges",
                                 name_of(k) + "_" + std::string(dtype_name(dt)) + "_edges_" +
                                     std::string(reduce_op_name(static_cast<ReduceOp>(op))),
                                 4, {c}));
      }
    }
  }
}

void point_to_point(std::vector<DecidedCase>& out) {
  // Both forms at both sizes: a library takes an eager path for small
  // messages and a rendezvous path for large ones, and each sets the
  // source it reports apart (a blocking recv wrong above 64 KiB passed);
  // and sizes between (an MPI reporting the wrong MPI_SOURCE for 4-64 KiB
  // passed 40 bytes and 512 KiB).
  const std::pair<std::size_t, const char*> counts[] = {
      {5, "_small"}, {1000, "_8KiB"}, {5000, "_40KiB"}, {65537, "_large"}};
  for (bool async : {false, true}) {
    for (const auto& [count, size_name] : counts) {
      const bool usual = count == (async ? 65537u : 5u);  // the names these cases had alone
      out.push_back(targeted("any_source",
                             std::string(async ? "irecv" : "recv") + "_in_subgroup" + (usual ? "" : size_name),
                             kUnsortedWorld, [async, count](const RunOnEveryRank& run, const std::string& context, bool) {
                               return run_any_source(run, kUnsortedWorld, kUnsorted, kUnsortedRoot, 2, count, async,
                                                     context);
                             }));
    }
    // Empty messages, each sender on a tag of its own: the source is all
    // a receive of nothing says (an MPI that left MPI_SOURCE as the caller
    // had it for an empty receive passed: empty receives were in batches,
    // which report no source).
    out.push_back(targeted("any_source", std::string(async ? "irecv" : "recv") + "_empty_in_subgroup", kUnsortedWorld,
                           [async](const RunOnEveryRank& run, const std::string& context, bool) {
                             return run_empty_sources(run, kUnsortedWorld, kUnsorted, kUnsortedRoot, async, context);
                           }));
    // Floating values a quarter above integers (an any-source receive that
    // carried them through an integer passed: every other was int64).
    out.push_back(targeted("any_source", std::string(async ? "irecv" : "recv") + "_in_subgroup_float64",
                           kUnsortedWorld, [async](const RunOnEveryRank& run, const std::string& context, bool) {
                             return run_any_source(run, kUnsortedWorld, kUnsorted, kUnsortedRoot, 2, 1000, async,
                                                   context, DType::kFloat64);
                           }));
  }
  for (bool any_source : {false, true}) {
    for (bool async : {false, true}) {
      // From any source too: an MPI posting large tags as MPI_ANY_TAG there
      // only passed (the tag range used named sources alone).
      out.push_back(targeted("tags",
                             std::string("whole_range_") + (async ? "irecv" : "recv") + (any_source ? "_any_source" : ""),
                             4, [async, any_source](const RunOnEveryRank& run, const std::string& context, bool) {
                               return run_tag_range(run, 4, {3, 1}, 3, 1, async, context, any_source);
                             }));
      out.back().may_hang = true;  // a receive refused for its tag leaves the sender's isends waiting
    }
  }
  // Named peers in a group that is not 0..k-1, blocking and async, small
  // and large (an MPI_Send that took its destination for a world rank on
  // such a communicator passed: every blocking send was on the world or on
  // ranks 0..k-1).
  for (bool async : {false, true}) {
    for (const std::size_t count : {std::size_t{5}, std::size_t{65537}}) {
      out.push_back(targeted("p2p_in_groups",
                             std::string(async ? "isend_irecv" : "send_recv") + "_ring" + (count == 5 ? "_small" : "_large"),
                             kUnsortedWorld, [async, count](const RunOnEveryRank& run, const std::string& context, bool) {
                               return run_ring(run, kUnsortedWorld, kUnsorted, {count}, async, context);
                             }));
    }
    // Sizes at a library's protocol edges, in turn on one group: the last
    // bytes below and at 4 KiB (an eager limit), 12 and 16 KB (a fragment
    // window), 32 and 64 KiB exactly and just under, and 5 MiB (past a 4 MiB
    // staging buffer or chunk) -- an MPI losing the last 8 bytes of 4,033 to
    // 4,096-byte sends, or bytes 4,096.. of 8 to 32 KB ones, passed: no
    // message had 801 to 4,096 bytes or 8 to 40 KB.
    out.push_back(targeted("p2p_in_groups",
                           std::string(async ? "isend_irecv" : "send_recv") + "_ring_protocol_edges", kUnsortedWorld,
                           [async](const RunOnEveryRank& run, const std::string& context, bool) {
                             return run_ring(run, kUnsortedWorld, kUnsorted,
                                             {504, 505, 510, 512, 1536, 2000, 4095, 4096, 8187, 8192, 655361}, async,
                                             context);
                           }));
  }
}

void barriers(std::vector<DecidedCase>& out) {
  // Longer than a loaded machine takes to answer a library's op (a Python
  // rank may be off its core for 100 ms): what a barrier that returns at
  // once needs to be seen.
  constexpr Nanos kLate = 500'000'000;
  auto barrier = [&](const std::string& name, CollectiveKind op, int world, std::vector<int> group, bool async,
                     int late) {
    CollectiveCase c;
    c.op = op;
    c.group = std::move(group);
    c.async_op = async;
    c.late_rank = late;
    c.late_ns = kLate;
    out.push_back(collective("barrier_entry", name, world, {c}));
  };
  barrier("barrier_world", CollectiveKind::kBarrier, 4, {}, false, 3);
  barrier("barrier_async_in_subgroup", CollectiveKind::kBarrier, kUnsortedWorld, kUnsorted, true, 1);
  // Blocking, in a group that is not 0..k-1: a library may take another
  // path there (one that returned at once passed the two above).
  barrier("barrier_in_subgroup", CollectiveKind::kBarrier, kUnsortedWorld, kUnsorted, false, 1);
  barrier("monitored_barrier_in_subgroup", CollectiveKind::kMonitoredBarrier, kUnsortedWorld, kUnsorted, false, 5);
  // Sizes that are not powers of two, on the world (a dissemination or
  // tree barrier takes another path there: an MPI_Barrier that returned at
  // once on 3, 5, 6 and 7 ranks passed the four above), and the async form
  // on the world and on ranks 0..k-1 (an MPI_Ibarrier wrong there only
  // passed).
  barrier("barrier_world_3", CollectiveKind::kBarrier, 3, {}, false, 1);
  barrier("barrier_world_7", CollectiveKind::kBarrier, 7, {}, false, 6);
  barrier("barrier_async_world_5", CollectiveKind::kBarrier, 5, {}, true, 4);
  barrier("barrier_async_in_prefix_group", CollectiveKind::kBarrier, 4, {0, 1, 2}, true, 2);
  // Five and six members out of order, async and blocking (an MPI_Ibarrier
  // that completed at once on five or more members that are not 0..k-1
  // passed every case above).
  barrier("barrier_async_on_five_of_seven", CollectiveKind::kBarrier, 7, {6, 2, 0, 5, 3}, true, 5);
  barrier("barrier_on_six_of_seven", CollectiveKind::kBarrier, 7, {6, 2, 0, 5, 3, 1}, false, 1);
  // Eight to ten members (an MPI_Barrier and MPI_Ibarrier returning at once
  // from eight members on met nine only in random cases, which do not time
  // a barrier's entry; a torch barrier doing so from ten, never).
  barrier("barrier_world_10", CollectiveKind::kBarrier, 10, {}, false, 4);
  barrier("barrier_async_on_eight_of_nine", CollectiveKind::kBarrier, 9, {8, 1, 7, 2, 0, 6, 3, 5}, true, 6);
  // A barrier right after another on the same group, its late member late
  // for the second only (a barrier that returned at once when the one before
  // it had just ended passed: every other case has one barrier, or a late
  // member late for all of them).
  auto back_to_back = [&](const std::string& name, int world, std::vector<int> group, bool async, int late) {
    CollectiveCase first;
    first.op = CollectiveKind::kBarrier;
    first.group = std::move(group);
    first.async_op = async;
    CollectiveCase second = first;
    second.late_rank = late;
    second.late_ns = kLate;
    out.push_back(collective("barrier_entry", name, world, {first, second}));
  };
  back_to_back("barrier_after_barrier_world", 4, {}, false, 2);
  back_to_back("barrier_after_barrier_async_in_subgroup", kUnsortedWorld, kUnsorted, true, 1);
  // And right after point-to-point traffic on the same group (a barrier
  // whose state a send or receive had just moved, released at once, passed:
  // every other barrier case ran on a group that had carried no p2p).
  // The late member 300 ms late where a library's rank processes answer
  // (well within it), 50 ms where collie's core does (in under one), as
  // run_and_check() times its late members.
  for (bool async : {false, true}) {
    out.push_back(targeted("barrier_entry", std::string("barrier_after_p2p") + (async ? "_async" : "") + "_in_subgroup",
                           kUnsortedWorld, [async](const RunOnEveryRank& run, const std::string& context, bool library) {
                             return run_barrier_after_p2p(run, kUnsortedWorld, kUnsorted, 2,
                                                          library ? 300'000'000 : 50'000'000, async, context);
                           }));
  }
}

// The deadline a call_timeout case expects to expire: 300 ms where a
// library's processes answer (as run_barrier_after_p2p's late member), 20
// ms where collie's core does -- each case waits it out, on TCP in real
// time, and only a failure before it (a timer never fires early, loaded or
// not) or seconds after it is wrong.
Nanos expiring_deadline(bool library) { return library ? 300'000'000 : 20'000'000; }

void call_timeout(std::vector<DecidedCase>& out) {
  // all_reduce, and the calls a library may time out apart: a barrier, a
  // broadcast's receiver (a Work.wait(timeout) honoured by all_reduce alone
  // passed), a receive from any source and an irecv (a receive's
  // wait(timeout) that waited the group's timeout passed).
  for (TimedOp op :
       {TimedOp::kAllReduce, TimedOp::kBarrier, TimedOp::kBroadcast, TimedOp::kRecvAnySource, TimedOp::kIrecv}) {
    DecidedCase d = targeted("call_timeout", timed_op_name(op) + "_own_deadline", 2,
                             [op](const RunOnEveryRank& run, const std::string& context, bool library) {
                               return run_call_timeout(run, 2, {1, 0}, 1, 8'000'000'000, expiring_deadline(library),
                                                       context, op);
                             });
    d.needs_timeouts = true;
    d.ends_job = true;
    out.push_back(std::move(d));
  }
  // A group's own timeout on a receive (every timeout case ran on groups
  // whose timeout was the run's, or on collectives).
  DecidedCase d = targeted("call_timeout", "recv_on_a_group_with_its_own_timeout", 3,
                           [](const RunOnEveryRank& run, const std::string& context, bool library) {
                             return run_group_timeout(run, 3, {2, 0}, 2, expiring_deadline(library), 5'000'000'000,
                                                      context);
                           });
  d.needs_timeouts = true;
  d.ends_job = true;
  out.push_back(std::move(d));
  // The same group timeout on a collective (collectives that ran under the
  // default group's timeout while p2p was right passed).
  DecidedCase a = targeted("call_timeout", "all_reduce_on_a_group_with_its_own_timeout", 3,
                           [](const RunOnEveryRank& run, const std::string& context, bool library) {
                             return run_group_timeout(run, 3, {2, 0}, 2, expiring_deadline(library), 5'000'000'000,
                                                      context, true);
                           });
  a.needs_timeouts = true;
  a.ends_job = true;
  out.push_back(std::move(a));
}

}  // namespace

std::vector<DecidedCase> decided_cases() {
  std::vector<DecidedCase> out;
  unsorted_groups_and_async_forms(out);
  sizes(out);
  layouts(out);
  uneven_all_to_all(out);
  reduce_edges(out);
  point_to_point(out);
  barriers(out);
  call_timeout(out);
  return out;
}

CaseOutcome run_decided(const DecidedCase& d, const RunOnEveryRank& run, bool strict, bool library) {
  const std::string context = "world " + std::to_string(d.world);
  if (d.check) return d.check(run, context, library);
  return run_and_check(run, d.world, d.cases, strict, context, library);
}

}  // namespace collie::conformance
