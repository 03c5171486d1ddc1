#include "check/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace collie::reference {

Tensor clone(const Tensor& t) {
  Tensor c(t.dtype(), t.shape());
  if (t.bytes()) std::memcpy(c.data(), t.data(), t.bytes());
  return c;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.count() == b.count() &&
         (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

namespace {

bool is_int(DType t) { return !is_floating(t) && t != DType::kBool; }

// Combines element i of `acc` with element i of `x` (both of the same dtype).
void combine(Tensor& acc, const Tensor& x, std::size_t i, ReduceOp op) {
  const DType dt = acc.dtype();
  if (dt == DType::kBool) {
    const bool a = acc.get(i) != 0, b = x.get(i) != 0;
    bool r = false;
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kMax: case ReduceOp::kBor: r = a || b; break;
      case ReduceOp::kProduct: case ReduceOp::kMin: case ReduceOp::kBand: r = a && b; break;
      case ReduceOp::kBxor: r = a != b; break;
      case ReduceOp::kAvg: throw std::logic_error("AVG on bool");
    }
    acc.set(i, r ? 1 : 0);
    return;
  }
  if (is_int(dt)) {
    const std::int64_t a = acc.get_int(i), b = x.get_int(i);
    std::int64_t r = 0;
    switch (op) {
      case ReduceOp::kSum: r = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b)); break;
      case ReduceOp::kProduct: r = static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b)); break;
      case ReduceOp::kMin: r = a < b ? a : b; break;
      case ReduceOp::kMax: r = a < b ? b : a; break;
      case ReduceOp::kBand: r = a & b; break;
      case ReduceOp::kBor: r = a | b; break;
      case ReduceOp::kBxor: r = a ^ b; break;
      case ReduceOp::kAvg: throw std::logic_error("AVG on an integer");
    }
    acc.set_int(i, r);  // narrows modulo 2^bits
    return;
  }
  const double a = acc.get(i), b = x.get(i);
  double r = 0;
  // -0.0 orders below +0.0 for MIN/MAX; every NaN becomes the positive quiet NaN.
  const bool below = a < b || (a == b && std::signbit(a) && !std::signbit(b));
  switch (op) {
    case ReduceOp::kSum: case ReduceOp::kAvg: r = a + b; break;
    case ReduceOp::kProduct: r = a * b; break;
    case ReduceOp::kMin: r = std::isnan(a) || std::isnan(b) ? NAN : (below ? a : b); break;
    case ReduceOp::kMax: r = std::isnan(a) || std::isnan(b) ? NAN : (below ? b : a); break;
    default: throw std::logic_error("bitwise op on a float");
  }
  if (std::isnan(r)) r = NAN;
  acc.set(i, r);  // rounds to the dtype
}

Tensor reduce_all(const std::vector<const Tensor*>& in, ReduceOp op) {
  Tensor acc = clone(*in.at(0));
  for (std::size_t r = 1; r < in.size(); ++r)
    for (std::size_t i = 0; i < acc.count(); ++i) combine(acc, *in[r], i, op);
  if (op == ReduceOp::kAvg) {
    const double n = static_cast<double>(in.size());
    for (std::size_t i = 0; i < acc.count(); ++i) {
      // SUM, then one division: in float for the 16/32-bit types, double for float64.
      if (acc.dtype() == DType::kFloat64) acc.set(i, acc.get(i) / n);
      else acc.set(i, static_cast<double>(static_cast<float>(acc.get(i)) / static_cast<float>(n)));
    }
  }
  return acc;
}

std::vector<const Tensor*> pointers(const std::vector<Tensor>& in) {
  std::vector<const Tensor*> p;
  for (const Tensor& t : in) p.push_back(&t);
  return p;
}

}  // namespace

Tensor reduction(const std::vector<const Tensor*>& in, ReduceOp op) { return reduce_all(in, op); }

Tensor pairwise_reduction(const std::vector<const Tensor*>& in, ReduceOp op, const std::vector<std::size_t>& distances) {
  if (op == ReduceOp::kAvg) throw std::invalid_argument("pairwise_reduction: not for AVG");
  if (in.empty() || (in.size() & (in.size() - 1)) != 0)
    throw std::invalid_argument("pairwise_reduction: needs a power-of-two number of inputs");
  std::vector<Tensor> level;
  for (const Tensor* t : in) level.push_back(clone(*t));
  for (std::size_t d : distances) {
    if (d == 0 || d >= level.size()) throw std::invalid_argument("pairwise_reduction: distance out of range");
    std::vector<Tensor> next;
    for (std::size_t i = 0; i < level.size(); ++i) {
      // Input i and its partner i ^ d, lower first (every op here commutes).
      const std::size_t j = i ^ d;
      next.push_back(reduce_all({&level[std::min(i, j)], &level[std::max(i, j)]}, op));
    }
    level = std::move(next);
  }
  return std::move(level.at(0));
}

std::vector<Tensor> broadcast(const std::vector<Tensor>& in, int root) {
  std::vector<Tensor> out;
  for (std::size_t r = 0; r < in.size(); ++r) out.push_back(clone(in[static_cast<std::size_t>(root)]));
  return out;
}

std::vector<Tensor> reduce(const std::vector<Tensor>& in, int root, ReduceOp op) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(clone(t));
  out[static_cast<std::size_t>(root)] = reduce_all(pointers(in), op);
  return out;
}

std::vector<Tensor> all_reduce(const std::vector<Tensor>& in, ReduceOp op) {
  Tensor r = reduce_all(pointers(in), op);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < in.size(); ++i) out.push_back(clone(r));
  return out;
}

std::vector<Tensor> scatter(const std::vector<Tensor>& root_list) {
  std::vector<Tensor> out;
  for (const Tensor& t : root_list) out.push_back(clone(t));
  return out;
}

std::vector<std::vector<Tensor>> gather(const std::vector<Tensor>& in, int root) {
  std::vector<std::vector<Tensor>> out(in.size());
  for (const Tensor& t : in) out[static_cast<std::size_t>(root)].push_back(clone(t));
  return out;
}

std::vector<std::vector<Tensor>> all_gather(const std::vector<Tensor>& in) {
  std::vector<std::vector<Tensor>> out(in.size());
  for (auto& o : out)
    for (const Tensor& t : in) o.push_back(clone(t));
  return out;
}

std::vector<Tensor> reduce_scatter(const std::vector<std::vector<Tensor>>& in_lists, ReduceOp op) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < in_lists.size(); ++i) {
    std::vector<const Tensor*> block_i;
    for (const auto& list : in_lists) block_i.push_back(&list.at(i));
    out.push_back(reduce_all(block_i, op));
  }
  return out;
}

std::vector<std::vector<Tensor>> all_to_all(const std::vector<std::vector<Tensor>>& in_lists) {
  std::vector<std::vector<Tensor>> out(in_lists.size());
  for (std::size_t i = 0; i < in_lists.size(); ++i)
    for (std::size_t j = 0; j < in_lists.size(); ++j) out[i].push_back(clone(in_lists[j].at(i)));
  return out;
}

}  // namespace collie::reference
