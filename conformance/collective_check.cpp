#include "conformance/collective_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "check/compare.h"
#include "check/reference.h"
#include "core/communicator.h"
#include "core/error.h"
#include "sim/prng.h"

namespace collie::conformance {

std::string CollectiveCase::describe() const {
  std::ostringstream os;
  os << collective_name(op) << "(" << dtype_name(dtype) << " x " << count;
  if (op == CollectiveKind::kReduce || op == CollectiveKind::kAllReduce || op == CollectiveKind::kReduceScatter)
    os << ", " << reduce_op_name(reduce_op);
  if (op == CollectiveKind::kBroadcast || op == CollectiveKind::kReduce || op == CollectiveKind::kScatter ||
      op == CollectiveKind::kGather)
    os << ", root " << root;
  os << ", " << algorithm_name(algorithm) << ") on ";
  if (group.empty()) {
    os << "world";
  } else {
    std::vector<int> g = group;
    std::sort(g.begin(), g.end());
    os << "{";
    for (std::size_t i = 0; i < g.size(); ++i) os << (i ? "," : "") << g[i];
    os << "}";
  }
  os << " data_seed " << data_seed;
  if (tensor_form) os << " tensor_form";
  if (uneven) os << " uneven";
  if (special_values) os << " special_values";
  if (rounding) os << " rounding";
  return os.str();
}

namespace {

// Writes one element's raw bits (little-endian, the dtype's width).
void set_bits(Tensor& t, std::size_t i, std::uint64_t bits) {
  const std::size_t es = dtype_size(t.dtype());
  std::memcpy(static_cast<std::byte*>(t.data()) + i * es, &bits, es);
}

// An element from `cls` (the same for every rank at this index) chosen by
// `h` (this rank's): see CollectiveCase::special_values for why each class
// stays exact in any order. PRODUCT keeps to factors of magnitude 1 beside
// the specials: a factor 2 could overflow float16 early in one order only.
void set_special(Tensor& t, std::size_t i, std::uint64_t cls, std::uint64_t h, bool product) {
  int exp_bits = 8, mant_bits = 23;
  switch (t.dtype()) {
    case DType::kFloat16: exp_bits = 5; mant_bits = 10; break;
    case DType::kBFloat16: exp_bits = 8; mant_bits = 7; break;
    case DType::kFloat64: exp_bits = 11; mant_bits = 52; break;
    default: break;
  }
  const std::uint64_t sign = ((h >> 8) & 1) << (exp_bits + mant_bits);
  const std::uint64_t inf = ((std::uint64_t{1} << exp_bits) - 1) << mant_bits;
  const std::uint64_t quiet = std::uint64_t{1} << (mant_bits - 1);
  static constexpr double kSmall[] = {1, -1, 2, -2, 3};
  const double small = kSmall[(h >> 16) % (product ? 2 : 5)];
  switch (cls) {
    case 0:  // signed zeros
      set_bits(t, i, sign);
      return;
    case 1:  // NaNs of both signs, quiet and signalling, with payloads
      switch (h % 6) {
        case 0: set_bits(t, i, sign | inf | quiet); return;
        case 1: set_bits(t, i, sign | inf | quiet | 1); return;
        case 2: set_bits(t, i, sign | inf | 1); return;
        case 3: set_bits(t, i, sign); return;
        default: t.set(i, small); return;
      }
    case 2:  // infinities of both signs
      if (h % 3 == 0) set_bits(t, i, sign | inf);
      else if (h % 3 == 1) set_bits(t, i, sign);
      else t.set(i, small);
      return;
    case 3:  // subnormals (and zeros): multiples of the smallest, exact when summed
      if (product && h % 2) t.set(i, small);
      else set_bits(t, i, sign | (h >> 20) % 8);
      return;
    default:
      t.set(i, product ? small : static_cast<double>(static_cast<int>(h % 17) - 8));
      return;
  }
}

}  // namespace

void fill_inputs(Tensor& t, const CollectiveCase& c, int group_rank, int list_index) {
  const bool product = c.reduce_op == ReduceOp::kProduct && c.op != CollectiveKind::kBroadcast;
  for (std::size_t i = 0; i < t.count(); ++i) {
    std::uint64_t x = c.data_seed * 0x9e3779b97f4a7c15ull ^ (static_cast<std::uint64_t>(group_rank) << 40) ^
                      (static_cast<std::uint64_t>(list_index + 1) << 52) ^ i;
    const std::uint64_t h = sim::Prng::splitmix64(x);
    if (c.special_values && is_floating(t.dtype())) {
      std::uint64_t y = c.data_seed ^ (static_cast<std::uint64_t>(list_index + 1) << 52) ^ i;
      const std::uint64_t cls = sim::Prng::splitmix64(y) % 5;
      set_special(t, i, cls, h, product);
    } else if (c.rounding && is_floating(t.dtype())) {
      // 1 + k / 65536 times 2^-3 .. 2^3 (PRODUCT: 2^-2 .. 2^1, so that no
      // order of a few factors overflows float16), either sign; stored
      // rounded to the dtype.
      const double m = 1.0 + static_cast<double>(h & 0xffff) / 65536.0;
      const double v = std::ldexp(m, product ? static_cast<int>((h >> 16) % 4) - 2 : static_cast<int>((h >> 16) % 7) - 3);
      t.set(i, (h >> 24) & 1 ? -v : v);
    } else if (t.dtype() == DType::kBool) {
      t.set(i, static_cast<double>(h & 1));
    } else if (is_floating(t.dtype())) {
      if (product) {
        static constexpr double kFactors[4] = {-2, -1, 1, 2};
        t.set(i, kFactors[h & 3]);
      } else {
        t.set(i, static_cast<double>(static_cast<int>(h % 17) - 8));
      }
    } else {
      t.set_int(i, static_cast<std::int64_t>(h));
    }
  }
}

namespace {

constexpr double kSentinel = 77;  // what output buffers hold before an op writes them

Tensor make(const CollectiveCase& c) { return Tensor(c.dtype, {static_cast<std::int64_t>(c.count)}); }

Tensor sentinel(const CollectiveCase& c) {
  Tensor t = make(c);
  for (std::size_t i = 0; i < t.count(); ++i) t.set(i, kSentinel);
  return t;
}

// Per-case state: the buffers every rank hands to the op, and what the oracle expects of them.
struct CaseState {
  CollectiveCase c;
  std::vector<int> members;                  // sorted global ranks
  std::vector<int> group_rank;               // by global rank, -1 outside
  std::vector<Tensor> tensor;                // by global rank: in/out tensor
  std::vector<std::vector<Tensor>> list;     // by global rank: scatter/gather/all_gather lists
  std::vector<Tensor> want_tensor;           // by global rank
  std::vector<std::vector<Tensor>> want_list;
  // The second buffer of the tensor forms and all_to_all, by global rank:
  // all_gather_into_tensor's output, reduce_scatter_tensor's and
  // all_to_all_single's input; all_to_all's input list.
  std::vector<Tensor> aux, want_aux;
  std::vector<std::vector<Tensor>> aux_list, want_aux_list;
  // all_to_all_single's splits, by global rank.
  std::vector<std::vector<std::size_t>> out_splits, in_splits;
  // want_tensor is the one result of the butterfly order that the forced
  // algorithm combines in (a power-of-two group, inexact inputs): collie's
  // core must give it bit for bit, with any number of contributors.
  bool tree_order = false;
  // Rounding cases: per element, the sum of the operands' magnitudes behind
  // each rank's reduced tensor (float64), bounding a sum's rounding error
  // under cancellation. By global rank; empty where not computed.
  std::vector<Tensor> magnitudes;
};

// Element-wise sum of |x| over `in` (float64).
Tensor magnitude_sum(const std::vector<const Tensor*>& in) {
  Tensor m(DType::kFloat64, {static_cast<std::int64_t>(in.empty() ? 0 : in[0]->count())});
  for (std::size_t i = 0; i < m.count(); ++i) {
    double sum = 0;
    for (const Tensor* t : in) sum += std::fabs(t->get(i));
    m.set(i, sum);
  }
  return m;
}

// A forced all_reduce algorithm whose every rank combines in one known
// pairwise order on a power-of-two group (no fold): the distances it pairs
// ranks at, first to last. Empty for the rest.
std::vector<std::size_t> butterfly_distances(Algorithm a, std::size_t n) {
  std::vector<std::size_t> d;
  if (n < 2 || (n & (n - 1)) != 0) return d;
  if (a == Algorithm::kRecursiveDoubling)
    for (std::size_t m = 1; m < n; m <<= 1) d.push_back(m);
  if (a == Algorithm::kHalvingDoubling)
    for (std::size_t m = n / 2; m >= 1; m >>= 1) d.push_back(m);
  return d;
}

// Elements group rank `from` sends group rank `to` in an all_to_all case.
std::size_t block_count(const CollectiveCase& c, int from, int to) {
  if (!c.uneven) return c.count;
  std::uint64_t x = c.data_seed ^ (static_cast<std::uint64_t>(from) << 20) ^ (static_cast<std::uint64_t>(to) << 40);
  return sim::Prng::splitmix64(x) % (2 * c.count + 1);
}

Tensor of_count(DType dtype, std::size_t count, double value) {
  Tensor t(dtype, {static_cast<std::int64_t>(count)});
  for (std::size_t i = 0; i < count; ++i) t.set(i, value);
  return t;
}

// The blocks laid end to end in one tensor.
Tensor concat(const std::vector<Tensor>& blocks, DType dtype) {
  std::size_t total = 0;
  for (const Tensor& b : blocks) total += b.count();
  Tensor t(dtype, {static_cast<std::int64_t>(total)});
  std::size_t at = 0;
  for (const Tensor& b : blocks) {
    if (b.bytes()) std::memcpy(static_cast<std::byte*>(t.data()) + at, b.data(), b.bytes());
    at += b.bytes();
  }
  return t;
}

CaseState prepare(const CollectiveCase& c, int world) {
  CaseState s;
  s.c = c;
  if (c.group.empty()) {
    for (int r = 0; r < world; ++r) s.members.push_back(r);
  } else {
    s.members = c.group;
    std::sort(s.members.begin(), s.members.end());
  }
  const auto W = static_cast<std::size_t>(world);
  const int n = static_cast<int>(s.members.size());
  s.group_rank.assign(W, -1);
  for (int i = 0; i < n; ++i) s.group_rank[static_cast<std::size_t>(s.members[static_cast<std::size_t>(i)])] = i;
  s.list.resize(W);
  s.want_list.resize(W);
  s.aux_list.resize(W);
  s.want_aux_list.resize(W);
  s.out_splits.resize(W);
  s.in_splits.resize(W);
  const int root_g = s.group_rank[static_cast<std::size_t>(std::clamp(c.root, 0, world - 1))];

  std::vector<Tensor> inputs;  // by group rank
  for (int i = 0; i < n; ++i) {
    Tensor t = make(c);
    fill_inputs(t, c, i, -1);
    inputs.push_back(std::move(t));
  }
  for (int r = 0; r < world; ++r) {
    const int g = s.group_rank[static_cast<std::size_t>(r)];
    if (g < 0 || c.op == CollectiveKind::kScatter || c.op == CollectiveKind::kReduceScatter ||
        c.op == CollectiveKind::kAllToAll) {
      s.tensor.push_back(sentinel(c));
    } else {
      s.tensor.push_back(reference::clone(inputs[static_cast<std::size_t>(g)]));
    }
  }
  // Expected values default to "unchanged".
  for (int r = 0; r < world; ++r) s.want_tensor.push_back(reference::clone(s.tensor[static_cast<std::size_t>(r)]));
  s.aux.resize(W);
  s.want_aux.resize(W);

  auto at = [&](int g) { return static_cast<std::size_t>(s.members[static_cast<std::size_t>(g)]); };
  switch (c.op) {
    case CollectiveKind::kBroadcast: {
      auto out = reference::broadcast(inputs, root_g);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      break;
    }
    case CollectiveKind::kReduce: {
      auto out = reference::reduce(inputs, root_g, c.reduce_op);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      break;
    }
    case CollectiveKind::kAllReduce: {
      std::vector<const Tensor*> in;
      for (const Tensor& t : inputs) in.push_back(&t);
      const auto tree = butterfly_distances(c.algorithm, static_cast<std::size_t>(n));
      s.tree_order =
          c.rounding && !tree.empty() && (c.reduce_op == ReduceOp::kSum || c.reduce_op == ReduceOp::kProduct);
      const Tensor r = s.tree_order ? reference::pairwise_reduction(in, c.reduce_op, tree)
                                    : reference::reduction(in, c.reduce_op);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = reference::clone(r);
      if (c.rounding) {
        s.magnitudes.resize(W);
        for (int g = 0; g < n; ++g) s.magnitudes[at(g)] = magnitude_sum(in);
      }
      break;
    }
    case CollectiveKind::kScatter: {
      std::vector<Tensor> root_list;
      for (int i = 0; i < n; ++i) {
        Tensor t = make(c);
        fill_inputs(t, c, root_g, i);
        root_list.push_back(std::move(t));
      }
      auto out = reference::scatter(root_list);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      s.list[at(root_g)] = std::move(root_list);
      for (const Tensor& t : s.list[at(root_g)]) s.want_list[at(root_g)].push_back(reference::clone(t));
      break;
    }
    case CollectiveKind::kGather: {
      auto out = reference::gather(inputs, root_g);
      for (int i = 0; i < n; ++i) s.list[at(root_g)].push_back(sentinel(c));
      s.want_list[at(root_g)] = std::move(out[static_cast<std::size_t>(root_g)]);
      break;
    }
    case CollectiveKind::kAllGather: {
      auto out = reference::all_gather(inputs);
      for (int g = 0; g < n; ++g) {
        if (c.tensor_form) {
          s.aux[at(g)] = of_count(c.dtype, c.count * static_cast<std::size_t>(n), kSentinel);
          s.want_aux[at(g)] = concat(out[static_cast<std::size_t>(g)], c.dtype);
        } else {
          for (int i = 0; i < n; ++i) s.list[at(g)].push_back(sentinel(c));
          s.want_list[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
        }
      }
      break;
    }
    case CollectiveKind::kReduceScatter: {
      std::vector<std::vector<Tensor>> in_lists;  // by group rank
      for (int g = 0; g < n; ++g) {
        in_lists.emplace_back();
        for (int i = 0; i < n; ++i) {
          Tensor t = make(c);
          fill_inputs(t, c, g, i);
          in_lists.back().push_back(std::move(t));
        }
      }
      auto out = reference::reduce_scatter(in_lists, c.reduce_op);
      if (c.rounding) {
        s.magnitudes.resize(W);
        for (int g = 0; g < n; ++g) {
          std::vector<const Tensor*> blocks;
          for (const auto& l : in_lists) blocks.push_back(&l[static_cast<std::size_t>(g)]);
          s.magnitudes[at(g)] = magnitude_sum(blocks);
        }
      }
      for (int g = 0; g < n; ++g) {
        s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
        if (c.tensor_form) {
          s.aux[at(g)] = concat(in_lists[static_cast<std::size_t>(g)], c.dtype);
          s.want_aux[at(g)] = reference::clone(s.aux[at(g)]);
        } else {
          for (const Tensor& t : in_lists[static_cast<std::size_t>(g)]) {
            s.list[at(g)].push_back(reference::clone(t));
            s.want_list[at(g)].push_back(reference::clone(t));
          }
        }
      }
      break;
    }
    case CollectiveKind::kAllToAll: {
      std::vector<std::vector<Tensor>> in_lists;  // by group rank
      for (int g = 0; g < n; ++g) {
        in_lists.emplace_back();
        for (int j = 0; j < n; ++j) {
          Tensor t(c.dtype, {static_cast<std::int64_t>(block_count(c, g, j))});
          fill_inputs(t, c, g, j);
          in_lists.back().push_back(std::move(t));
        }
      }
      auto out = reference::all_to_all(in_lists);
      for (int g = 0; g < n; ++g) {
        const auto ug = static_cast<std::size_t>(g);
        if (c.tensor_form) {
          std::vector<Tensor> sentinels;
          for (int i = 0; i < n; ++i) {
            if (c.uneven) s.out_splits[at(g)].push_back(block_count(c, i, g));
            if (c.uneven) s.in_splits[at(g)].push_back(block_count(c, g, i));
            sentinels.push_back(of_count(c.dtype, block_count(c, i, g), kSentinel));
          }
          s.tensor[at(g)] = concat(sentinels, c.dtype);
          s.want_tensor[at(g)] = concat(out[ug], c.dtype);
          s.aux[at(g)] = concat(in_lists[ug], c.dtype);
          s.want_aux[at(g)] = reference::clone(s.aux[at(g)]);
        } else {
          for (int i = 0; i < n; ++i)
            s.list[at(g)].push_back(of_count(c.dtype, block_count(c, i, g), kSentinel));
          s.want_list[at(g)] = std::move(out[ug]);
          for (const Tensor& t : in_lists[ug]) {
            s.aux_list[at(g)].push_back(reference::clone(t));
            s.want_aux_list[at(g)].push_back(reference::clone(t));
          }
        }
      }
      break;
    }
    case CollectiveKind::kBarrier:
    case CollectiveKind::kNone:
      break;
  }
  return s;
}

Work issue(Dist& comm, CaseState& s, const Group& g) {
  const auto r = static_cast<std::size_t>(comm.rank());
  const CollectiveCase& c = s.c;
  CollectiveOptions o{c.algorithm};
  std::vector<TensorView> views, aux_views;
  for (Tensor& t : s.list[r]) views.push_back(t.view());
  for (Tensor& t : s.aux_list[r]) aux_views.push_back(t.view());
  TensorView t = s.tensor[r].view();
  TensorView aux = s.aux[r].view();
  switch (c.op) {
    case CollectiveKind::kBroadcast: return comm.broadcast(t, c.root, g, o);
    case CollectiveKind::kReduce: return comm.reduce(t, c.root, c.reduce_op, g, o);
    case CollectiveKind::kAllReduce: return comm.all_reduce(t, c.reduce_op, g, o);
    case CollectiveKind::kScatter: return comm.scatter(t, c.root, views, g, o);
    case CollectiveKind::kGather: return comm.gather(t, c.root, views, g, o);
    case CollectiveKind::kAllGather:
      return c.tensor_form ? comm.all_gather_into_tensor(aux, t, g, o) : comm.all_gather(views, t, g, o);
    case CollectiveKind::kReduceScatter:
      return c.tensor_form ? comm.reduce_scatter_tensor(t, aux, c.reduce_op, g, o)
                           : comm.reduce_scatter(t, views, c.reduce_op, g, o);
    case CollectiveKind::kAllToAll:
      return c.tensor_form ? comm.all_to_all_single(t, aux, s.out_splits[r], s.in_splits[r], g, o)
                           : comm.all_to_all(views, aux_views, g, o);
    case CollectiveKind::kBarrier: return comm.barrier(g, o);
    case CollectiveKind::kNone: break;
  }
  return Work();
}


// The first difference between a result and what the oracle says, exact.
std::string differs(const Tensor& got, const Tensor& want) {
  return check::compare_tensors(got, want, check::CompareRule{.bitwise = true});
}

// Element i of t as a tensor of one element.
Tensor element(const Tensor& t, std::size_t i) {
  Tensor one(t.dtype(), {1});
  const std::size_t es = dtype_size(t.dtype());
  std::memcpy(one.data(), static_cast<const std::byte*>(t.data()) + i * es, es);
  return one;
}

// For special-value inputs: the first difference torch's semantics forbid
// (empty if none), with `note` the first it leaves open -- a NaN's sign or
// payload, a zero's sign, and whether MIN/MAX propagate NaN (collie's core
// does, as torch.minimum does; NCCL's and Gloo's need not).
std::string special_difference(const Tensor& got, const Tensor& want, const CollectiveCase& c, std::string& note) {
  const bool min_max = (c.reduce_op == ReduceOp::kMin || c.reduce_op == ReduceOp::kMax) &&
                       (c.op == CollectiveKind::kReduce || c.op == CollectiveKind::kAllReduce ||
                        c.op == CollectiveKind::kReduceScatter);
  const std::string loose = check::compare_tensors(got, want);
  if (!min_max || got.count() != want.count() || got.dtype() != want.dtype()) {
    if (loose.empty()) note = differs(got, want) + " (only a NaN's sign or payload or a zero's sign differs: torch "
                                                    "does not specify them; collie's core gives the canonical NaN "
                                                    "and orders -0.0 below +0.0)";
    return loose;
  }
  for (std::size_t i = 0; i < got.count(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (g == w || (std::isnan(g) && std::isnan(w))) {
      if (note.empty()) {
        const std::string bits = differs(element(got, i), element(want, i));
        if (!bits.empty())
          note = "element " + std::to_string(i) + bits.substr(bits.find(" is ")) +
                 " (a zero's sign or a NaN's bits: torch does not specify them; collie's core orders -0.0 below "
                 "+0.0 and gives the canonical NaN)";
      }
      continue;
    }
    if (std::isnan(w)) {
      if (note.empty())
        note = "element " + std::to_string(i) + " is " + format_item(got, i) + ", collie's core says nan (" +
               std::string(reduce_op_name(c.reduce_op)) +
               " does not propagate NaN here: torch does not specify it; collie's core does, as torch.minimum and torch.maximum do)";
      continue;
    }
    return "element " + std::to_string(i) + " is " + format_item(got, i) + ", expected " + format_item(want, i);
  }
  return {};
}

// Whether the run failed only because the implementation lacks an op: the
// reason, else empty.
std::string unsupported(const RunResult& res) {
  for (const RankOutcome& o : res.ranks) {
    if (!o.error) continue;
    try {
      std::rethrow_exception(o.error);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kUnsupported) return e.what();
    } catch (...) {
    }
  }
  return {};
}

CaseOutcome failed_run(const RunResult& res, const std::string& context) {
  CaseOutcome out;
  out.skipped = unsupported(res);
  if (out.skipped.empty()) out.failure = "run failed" + (context.empty() ? "" : " (" + context + ")") + ": " + res.describe();
  return out;
}

RunOnEveryRank on_local_world(LocalWorld& world, const std::string& context) {
  return [&world, context](const DistProgram& program) {
    return world.run([&program](Communicator& c) { return program(c); }, context);
  };
}

std::string strict_failure(const CaseOutcome& o) {
  if (!o.skipped.empty()) return "skipped: " + o.skipped;
  return o.failure;
}

}  // namespace

CaseOutcome run_and_check(const RunOnEveryRank& run, int W, const std::vector<CollectiveCase>& cases, bool strict,
                          const std::string& context) {
  std::vector<CaseState> states;
  for (const CollectiveCase& c : cases) states.push_back(prepare(c, W));

  auto program = [&](Dist& comm) -> Task<void> {
    std::vector<Group> groups;
    for (const CaseState& s : states) groups.push_back(s.c.group.empty() ? Group() : comm.new_group(s.c.group));
    std::vector<Work> works;
    for (std::size_t k = 0; k < states.size(); ++k) works.push_back(issue(comm, states[k], groups[k]));
    co_await wait_all(works);
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, context);

  CaseOutcome out;
  // A difference torch allows: a failure when strict, else a note.
  auto unspecified = [&](std::string text) {
    if (strict) {
      if (out.failure.empty()) out.failure = std::move(text);
    } else {
      out.notes.push_back(std::move(text));
    }
  };
  for (const CaseState& s : states) {
    const int root_g = s.group_rank[static_cast<std::size_t>(std::clamp(s.c.root, 0, W - 1))];
    for (int r = 0; r < W; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      const std::string who = s.c.describe() + ": rank " + std::to_string(r);
      std::string d = differs(s.tensor[ur], s.want_tensor[ur]);
      if (!d.empty() && s.c.rounding && !(s.tree_order && strict)) {
        // Inexact inputs: exact with two contributors (one rounding in any
        // order) or in the forced algorithm's known order on collie's core,
        // within the rounding orders allow otherwise (a library picks its own).
        const auto members = static_cast<int>(
            std::count_if(s.group_rank.begin(), s.group_rank.end(), [](int g) { return g >= 0; }));
        d = check::compare_tensors(s.tensor[ur], s.want_tensor[ur],
                                   check::CompareRule{.reduced = true, .op = s.c.reduce_op, .contributors = members,
                                                      .want_is = "expected",
                                                      .magnitudes = ur < s.magnitudes.size() && s.magnitudes[ur].count()
                                                                        ? &s.magnitudes[ur]
                                                                        : nullptr});
      }
      if (!d.empty() && s.c.special_values) {
        std::string note;
        d = special_difference(s.tensor[ur], s.want_tensor[ur], s.c, note);
        if (d.empty()) {
          unspecified(who + ": tensor " + note);
          continue;
        }
      }
      if (!d.empty()) {
        const int g = s.group_rank[ur];
        if (s.c.op == CollectiveKind::kReduce && g >= 0 && g != root_g) {
          unspecified(who + ": tensor " + d +
                      " (a non-destination rank of reduce: torch leaves its tensor unspecified; collie's core leaves "
                      "it unchanged)");
          continue;
        }
        out.failure = who + ": tensor " + d;
        return out;
      }
      if (s.aux[ur].dtype() == s.want_aux[ur].dtype() && s.aux[ur].count() == s.want_aux[ur].count()) {
        d = differs(s.aux[ur], s.want_aux[ur]);
      } else {
        d = "has " + std::to_string(s.aux[ur].count()) + " elements, expected " + std::to_string(s.want_aux[ur].count());
      }
      if (!d.empty()) {
        out.failure = who + ": " + (s.c.op == CollectiveKind::kAllGather ? "output" : "input") + " tensor " + d;
        return out;
      }
      for (const auto& [name, got, want] : {std::tuple{"list", &s.list[ur], &s.want_list[ur]},
                                            std::tuple{"input_list", &s.aux_list[ur], &s.want_aux_list[ur]}}) {
        if (got->size() != want->size()) {
          out.failure = who + ": " + name + " size differs";
          return out;
        }
        for (std::size_t i = 0; i < got->size(); ++i) {
          d = differs((*got)[i], (*want)[i]);
          if (!d.empty()) {
            out.failure = who + ": " + name + "[" + std::to_string(i) + "] " + d;
            return out;
          }
        }
      }
    }
    if (s.c.op == CollectiveKind::kAllReduce && !s.members.empty()) {
      const Tensor& first = s.tensor[static_cast<std::size_t>(s.members[0])];
      for (int m : s.members)
        if (!reference::bitwise_equal(first, s.tensor[static_cast<std::size_t>(m)])) {
          unspecified(s.c.describe() + ": all_reduce results differ between ranks " + std::to_string(s.members[0]) +
                      " and " + std::to_string(m) + " (collie's core gives identical bits everywhere)");
          break;
        }
    }
  }
  return out;
}

std::string run_and_check(LocalWorld& world, const std::vector<CollectiveCase>& cases, const std::string& context) {
  return strict_failure(run_and_check(on_local_world(world, context), world.world_size(), cases, true, context));
}

std::string run_and_check(sim::SimWorld& world, const std::vector<CollectiveCase>& cases) {
  return run_and_check(world.world(), cases, "seed " + std::to_string(world.options().seed));
}

CollectiveCase random_case(CollectiveKind op, int world, sim::Prng& prng, bool deep) {
  CollectiveCase c;
  c.op = op;
  if (prng.below(2) == 0) {
    for (int r = 0; r < world; ++r)
      if (prng.below(2)) c.group.push_back(r);
    if (c.group.empty()) c.group.push_back(static_cast<int>(prng.below(static_cast<std::uint64_t>(world))));
  }
  c.dtype = static_cast<DType>(prng.below(kNumDTypes));
  std::vector<ReduceOp> ops;
  for (int i = 0; i < kNumReduceOps; ++i)
    if (!reduce_op_unsupported(static_cast<ReduceOp>(i), c.dtype)) ops.push_back(static_cast<ReduceOp>(i));
  c.reduce_op = ops[prng.below(ops.size())];
  static constexpr std::size_t kCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 61, 127, 257, 1021, 4099};
  c.count = kCounts[prng.below(std::size(kCounts))];
  if (deep) {
    static constexpr std::size_t kDeepCounts[] = {65537, 262147, 1048573, 1572869};
    switch (prng.below(3)) {
      case 0: c.count = static_cast<std::size_t>(prng.below(static_cast<std::uint64_t>(world))); break;  // below the world size
      case 1: c.count = kDeepCounts[prng.below(std::size(kDeepCounts))]; break;
      default: break;
    }
    const bool block_wise = op == CollectiveKind::kAllGather || op == CollectiveKind::kGather ||
                            op == CollectiveKind::kScatter || op == CollectiveKind::kReduceScatter ||
                            op == CollectiveKind::kAllToAll;
    const std::size_t per_count = static_cast<std::size_t>(world) * (block_wise ? static_cast<std::size_t>(world) : 1);
    const std::size_t cap = (std::size_t{1} << 25) / per_count;
    if (c.count > cap) c.count = cap | 1;  // still odd
  }
  std::vector<int> members = c.group;
  if (members.empty())
    for (int r = 0; r < world; ++r) members.push_back(r);
  c.root = members[prng.below(members.size())];
  std::vector<Algorithm> algs = algorithms_for(op);
  algs.push_back(Algorithm::kAuto);
  c.algorithm = algs[prng.below(algs.size())];
  c.data_seed = prng.next();
  c.tensor_form = prng.below(2) == 1;
  c.uneven = op == CollectiveKind::kAllToAll && c.algorithm != Algorithm::kBruck && prng.below(2) == 1;
  return c;
}

std::string run_p2p_traffic(LocalWorld& world, sim::Prng& prng, int per_rank, const std::string& context) {
  return strict_failure(run_p2p_traffic(on_local_world(world, context), world.world_size(), prng, per_rank, context));
}

CaseOutcome run_p2p_traffic(const RunOnEveryRank& run, int W, sim::Prng& prng, int per_rank, const std::string& context) {
  if (W < 2) return {};
  struct Msg {
    int dst, tag;
    std::size_t count;
    std::int64_t value;
  };
  std::vector<std::vector<Msg>> plan(static_cast<std::size_t>(W));
  for (int r = 0; r < W; ++r)
    for (int i = 0; i < per_rank; ++i) {
      int dst = static_cast<int>(prng.below(static_cast<std::uint64_t>(W - 1)));
      if (dst >= r) ++dst;
      static constexpr std::size_t kSizes[] = {1, 3, 100, 20000};
      plan[static_cast<std::size_t>(r)].push_back(Msg{dst, static_cast<int>(prng.below(3)), kSizes[prng.below(4)],
                                                      r * 1000000 + i});
    }
  std::vector<bool> reverse_tags(static_cast<std::size_t>(W));
  for (auto&& b : reverse_tags) b = prng.below(2) == 1;
  std::string failure;
  auto program = [&](Dist& c) -> Task<void> {
    const auto me = static_cast<std::size_t>(c.rank());
    std::vector<Tensor> out, in;
    out.reserve(plan[me].size());
    std::vector<Work> works;
    for (const Msg& m : plan[me]) {
      out.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(m.count)});
      for (std::size_t k = 0; k < m.count; ++k) out.back().set_int(k, m.value + static_cast<std::int64_t>(k));
      works.push_back(c.isend(out.back(), m.dst, m.tag));
    }
    struct Expect {
      int src, tag;
      std::size_t count;
      std::int64_t value;
    };
    std::vector<Expect> expect;
    for (int s = 0; s < W; ++s)
      for (const Msg& m : plan[static_cast<std::size_t>(s)])
        if (m.dst == c.rank()) expect.push_back(Expect{s, m.tag, m.count, m.value});
    if (reverse_tags[me])
      std::stable_sort(expect.begin(), expect.end(), [](const Expect& a, const Expect& b) { return a.tag > b.tag; });
    in.reserve(expect.size());
    std::vector<Work> recvs;
    for (const Expect& e : expect) {
      in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(e.count)});
      recvs.push_back(c.irecv(in.back(), e.src, e.tag));
    }
    co_await wait_all(recvs);
    for (std::size_t k = 0; k < expect.size() && failure.empty(); ++k)
      for (std::size_t x = 0; x < expect[k].count; ++x)
        if (in[k].get_int(x) != expect[k].value + static_cast<std::int64_t>(x)) {
          failure = "rank " + std::to_string(me) + ": message " + std::to_string(k) + " from rank " +
                    std::to_string(expect[k].src) + " (tag " + std::to_string(expect[k].tag) + ") element " +
                    std::to_string(x) + " is " + std::to_string(in[k].get_int(x)) + ", expected " +
                    std::to_string(expect[k].value + static_cast<std::int64_t>(x)) +
                    " (a message overtook another, or was corrupted)";
          break;
        }
    co_await wait_all(works);
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, context);
  CaseOutcome out;
  out.failure = failure;
  return out;
}

}  // namespace collie::conformance
