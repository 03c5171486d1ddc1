#include "conformance/collective_case.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

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
  std::uint64_t x = c.data_seed ^ (static_cast<std::uint64_t>(from) << 20) ^ (static_cast<std::uint64_t>(to) << 40);
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
