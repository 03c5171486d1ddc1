#include "conformance/collective_case.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace collie::conformance {

std::string CollectiveCase::describe(bool with_algorithm, int group_size) const {
  const OpSpec& spec = op_spec(op_kind());
  std::ostringstream os;
  std::vector<std::string> args;
  if (std::any_of(spec.operands.begin(), spec.operands.end(), [](const Operand& o) { return o.present(); }))
    args.push_back(row < 0 && count == 1 ? std::string(dtype_name(dtype)) + " scalar (0-d)"
                                         : std::string(dtype_name(dtype)) + " x " + std::to_string(count) +
                                               (row > 0 ? " in rows of " + std::to_string(row) : std::string()));
  if (spec.reduce_op) args.emplace_back(reduce_op_name(reduce_op));
  if (spec.rooted) args.push_back("root " + std::to_string(root));
  if (with_algorithm && spec.algorithm) args.emplace_back(algorithm_name(algorithm));
  os << spec.name << "(";
  for (std::size_t i = 0; i < args.size(); ++i) os << (i ? ", " : "") << args[i];
  os << ") on ";
  if (group.empty()) {
    os << "world";
  } else {
    std::vector<int> g = group;
    std::sort(g.begin(), g.end());
    os << "{";
    for (std::size_t i = 0; i < g.size(); ++i) os << (i ? "," : "") << g[i];
    os << "}";
    if (g != group) {
      os << " (named {";
      for (std::size_t i = 0; i < group.size(); ++i) os << (i ? "," : "") << group[i];
      os << "})";
    }
  }
  os << " data_seed " << data_seed;
  if (async_op) os << (polled ? " async polled" : " async");
  if (views != ViewLayout::kContiguous) os << " " << view_layout_name(views);
  if (special_values) os << " special_values";
  if (rounding) os << " rounding";
  if (negative) os << " negative";
  if (edges) os << " edges";
  if (late_rank >= 0) os << ", rank " << late_rank << " enters " << late_ns / 1'000'000 << " ms late";
  if (uneven && op == CollectiveKind::kAllToAll && group_size > 0) {
    // Each group rank's input and output split sizes (elements), the
    // first eight ranks': what a failing case needs to be read alone.
    const int shown = std::min(group_size, 8);
    os << "; split sizes in/out by group rank:";
    for (int g = 0; g < shown; ++g) {
      os << " " << g << ": [";
      for (int i = 0; i < group_size; ++i) os << (i ? "," : "") << block_count(*this, g, i);
      os << "]/[";
      for (int i = 0; i < group_size; ++i) os << (i ? "," : "") << block_count(*this, i, g);
      os << "]";
    }
    if (group_size > shown) os << " ...";
  }
  return os.str();
}

CollectiveCase case_of(OpKind kind) {
  const OpSpec& spec = op_spec(kind);
  CollectiveCase c;
  c.op = spec.collective;
  for (const Operand& o : spec.operands) c.tensor_form = c.tensor_form || o.blocks;
  return c;
}

std::vector<CollectiveCase> then_async(const CollectiveCase& c, int async_root, std::uint64_t seed_step) {
  CollectiveCase async = c;
  async.async_op = true;
  async.root = async_root;
  async.data_seed += seed_step;
  return {c, async};
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
void set_special(Tensor& t, std::size_t i, std::uint64_t cls, std::uint64_t shared, std::uint64_t h, bool product) {
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
    case 5: {  // one infinity or signed zero on every rank (`shared` picks it): MAX of -inf
               // everywhere is -inf, not the lowest finite value
      const std::uint64_t same_sign = ((shared >> 8) & 1) << (exp_bits + mant_bits);
      set_bits(t, i, same_sign | ((shared >> 9) % 3 ? inf : 0));
      return;
    }
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

// An integer dtype's edge value chosen by `h` (CollectiveCase::edges).
std::int64_t edge_value(DType dt, std::uint64_t h) {
  switch (dt) {
    case DType::kInt8: {
      static constexpr std::int64_t kV[] = {-128, -127, -1, 0, 1, 126, 127};
      return kV[h % std::size(kV)];
    }
    case DType::kUInt8: {
      static constexpr std::int64_t kV[] = {0, 1, 127, 128, 129, 254, 255};
      return kV[h % std::size(kV)];
    }
    case DType::kInt32: {
      static constexpr std::int64_t kV[] = {INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX - 1, INT32_MAX};
      return kV[h % std::size(kV)];
    }
    case DType::kInt64: {
      static constexpr std::int64_t kV[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
      return kV[h % std::size(kV)];
    }
    default:
      return static_cast<std::int64_t>(h & 1);  // bool
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
      const std::uint64_t shared = sim::Prng::splitmix64(y);
      set_special(t, i, shared % 6, shared, h, product);
    } else if (c.rounding && is_floating(t.dtype())) {
      // 1 + k / 2^f times 2^-3 .. 2^3 (PRODUCT: 2^-2 .. 2^1, so that no
      // order of a few factors overflows float16), either sign; stored
      // rounded to the dtype. f is the dtype's fraction bits for float32
      // (23) and float64 (52), so that a sum of two needs their last bit (a
      // float64 SUM carried out in float32 passed with fewer), 16 for the
      // half types.
      const int f = t.dtype() == DType::kFloat64 ? 52 : t.dtype() == DType::kFloat32 ? 23 : 16;
      const std::uint64_t fraction = f == 16 ? (h & 0xffff) : sim::Prng::splitmix64(x) >> (64 - f);
      const double m = 1.0 + std::ldexp(static_cast<double>(fraction), -f);
      // Where nothing is reduced, the dtype's whole normal exponent range
      // too (a bfloat16 broadcast through float16 kept every value of
      // 1/8 .. 16).
      const bool moved = c.op != CollectiveKind::kAllReduce && c.op != CollectiveKind::kReduce &&
                         c.op != CollectiveKind::kReduceScatter;
      const int max_exp = t.dtype() == DType::kFloat64 ? 1000 : t.dtype() == DType::kFloat16 ? 14 : 120;
      const int e = moved ? static_cast<int>((h >> 16) % static_cast<std::uint64_t>(2 * max_exp + 1)) - max_exp
                    : product ? static_cast<int>((h >> 16) % 4) - 2
                              : static_cast<int>((h >> 16) % 7) - 3;
      const double v = std::ldexp(m, e);
      t.set(i, (h >> 24) & 1 ? -v : v);
    } else if (c.edges && !is_floating(t.dtype())) {
      t.set_int(i, edge_value(t.dtype(), h));
    } else if (c.negative && t.dtype() != DType::kUInt8 && t.dtype() != DType::kBool) {
      // Small magnitudes: exact in every dtype and order (PRODUCT: -1, -2).
      const auto v = product ? -1 - static_cast<std::int64_t>(h & 1) : -1 - static_cast<std::int64_t>(h % 100);
      if (is_floating(t.dtype())) t.set(i, static_cast<double>(v));
      else t.set_int(i, v);
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

OpKind CollectiveCase::op_kind() const {
  // The row of the table for this collective whose form (a tensor cut into
  // blocks, or lists) is the case's.
  for (const OpSpec& s : op_table()) {
    if (s.family != OpFamily::kCollective || s.collective != op) continue;
    bool blocks = false;
    for (const Operand& o : s.operands) blocks = blocks || o.blocks;
    if (blocks == tensor_form) return s.kind;
  }
  for (const OpSpec& s : op_table())
    if (s.family == OpFamily::kCollective && s.collective == op) return s.kind;
  return OpKind::kBarrier;
}

std::size_t block_count(const CollectiveCase& c, int from, int to) {
  if (!c.uneven) return c.count;
  if (from == c.silent_sender || to == c.silent_receiver) return 0;
  std::uint64_t x = c.data_seed ^ (static_cast<std::uint64_t>(from) << 20) ^ (static_cast<std::uint64_t>(to) << 40);
  if (c.row > 1) {
    const auto row = static_cast<std::size_t>(c.row);
    return row * (sim::Prng::splitmix64(x) % (2 * (c.count / row) + 1));
  }
  return sim::Prng::splitmix64(x) % (2 * c.count + 1);
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

}  // namespace collie::conformance
