#include "core/algorithm.h"

#include <algorithm>
#include <sstream>

namespace collie {

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kRecursiveDoubling: return "recursive_doubling";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kBinomialTree: return "binomial_tree";
    case Algorithm::kLinear: return "linear";
    case Algorithm::kDissemination: return "dissemination";
    case Algorithm::kBruck: return "bruck";
    case Algorithm::kPairwise: return "pairwise";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  // Every code: algorithm_name() names each value (its switch has no
  // default), so a new value parses without touching this loop.
  for (int i = 0; i < 256; ++i) {
    auto a = static_cast<Algorithm>(i);
    if (const std::string_view n = algorithm_name(a); n != "?" && n == name) return a;
  }
  return std::nullopt;
}

std::vector<Algorithm> algorithms_for(CollectiveKind op) {
  switch (op) {
    case CollectiveKind::kAllReduce:
      return {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling};
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
      return {Algorithm::kBinomialTree, Algorithm::kLinear};
    case CollectiveKind::kAllGather:
      return {Algorithm::kRing, Algorithm::kBruck};
    case CollectiveKind::kBarrier:
      return {Algorithm::kDissemination};
    case CollectiveKind::kMonitoredBarrier:
      return {Algorithm::kLinear};
    case CollectiveKind::kReduceScatter:
      return {Algorithm::kRing, Algorithm::kPairwise};
    case CollectiveKind::kAllToAll:
      return {Algorithm::kPairwise, Algorithm::kBruck};
    case CollectiveKind::kNone:
      return {};
  }
  return {};
}

bool algorithm_supports(Algorithm a, CollectiveKind op) {
  auto v = algorithms_for(op);
  return std::find(v.begin(), v.end(), a) != v.end();
}

Algorithm select_algorithm(CollectiveKind op, std::size_t bytes, int n, const AlgorithmSelection& sel) {
  switch (op) {
    case CollectiveKind::kAllReduce:
      if (bytes <= sel.allreduce_small_bytes) return Algorithm::kRecursiveDoubling;
      if (n > 0 && bytes / static_cast<std::size_t>(n) >= sel.allreduce_ring_chunk_bytes) return Algorithm::kRing;
      return Algorithm::kHalvingDoubling;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return Algorithm::kBinomialTree;
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
      return bytes * static_cast<std::size_t>(n) <= sel.scatter_tree_total_bytes ? Algorithm::kBinomialTree
                                                                                  : Algorithm::kLinear;
    case CollectiveKind::kAllGather:
      return bytes >= sel.allgather_ring_block_bytes ? Algorithm::kRing : Algorithm::kBruck;
    case CollectiveKind::kBarrier:
      return Algorithm::kDissemination;
    case CollectiveKind::kMonitoredBarrier:
      return Algorithm::kLinear;
    case CollectiveKind::kReduceScatter:
      return bytes >= sel.reduce_scatter_ring_block_bytes ? Algorithm::kRing : Algorithm::kPairwise;
    case CollectiveKind::kAllToAll:
      return Algorithm::kPairwise;
    case CollectiveKind::kNone:
      break;
  }
  return Algorithm::kAuto;
}

std::string describe_call(const Fingerprint& fp) {
  std::ostringstream os;
  os << collective_name(fp.op) << "(";
  if (fp.op != CollectiveKind::kBarrier && fp.op != CollectiveKind::kMonitoredBarrier) {
    os << dtype_name(fp.dtype);
    if (fp.op != CollectiveKind::kAllToAll) os << " x " << fp.count;
    if (fp.op == CollectiveKind::kReduce || fp.op == CollectiveKind::kAllReduce ||
        fp.op == CollectiveKind::kReduceScatter)
      os << ", " << reduce_op_name(fp.reduce_op);
    if (fp.root >= 0) os << ", root " << fp.root;
    os << ", ";
  }
  os << algorithm_name(static_cast<Algorithm>(fp.algorithm)) << ") #" << fp.seq;
  return os.str();
}

}  // namespace collie
