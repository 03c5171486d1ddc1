#include "check/op_checks.h"

#include <algorithm>

#include "check/compare.h"
#include "check/reference.h"

namespace collie::check {

namespace {

// The oracle's outputs of one call, by global rank: pointers into the
// call's own records, except reductions' results, computed once into
// `results` (a check holds no per-rank copies: a large run's memory is its
// tensors and records, not the oracle's).
std::map<int, std::vector<const Tensor*>> expected(const CollectiveRecord& r, std::vector<Tensor>& results) {
  auto gr = [&](int global) {
    return static_cast<std::size_t>(std::lower_bound(r.members.begin(), r.members.end(), global) - r.members.begin());
  };
  const bool block_wise = r.kind == CollectiveKind::kReduceScatter || r.kind == CollectiveKind::kAllToAll;
  std::vector<const Tensor*> in;  // by group rank
  if (r.kind != CollectiveKind::kScatter && r.kind != CollectiveKind::kBroadcast && !block_wise)
    for (int m : r.members) in.push_back(&r.inputs.at(m).at(0));
  // Block k of every member's input list, by group rank.
  auto column = [&](std::size_t k) {
    std::vector<const Tensor*> c;
    for (int m : r.members) c.push_back(&r.inputs.at(m).at(k));
    return c;
  };
  results.reserve(r.members.size());  // pointers into it are handed out
  std::map<int, std::vector<const Tensor*>> want;
  switch (r.kind) {
    case CollectiveKind::kBroadcast:
      for (int m : r.members) want[m].push_back(&r.inputs.at(r.root).at(0));
      break;
    case CollectiveKind::kReduce:
      results.push_back(reference::reduction(in, r.op));
      for (int m : r.members) want[m].push_back(m == r.root ? &results.back() : in[gr(m)]);
      break;
    case CollectiveKind::kAllReduce:
      results.push_back(reference::reduction(in, r.op));
      for (int m : r.members) want[m].push_back(&results.back());
      break;
    case CollectiveKind::kReduceScatter:
      for (int m : r.members) {
        results.push_back(reference::reduction(column(gr(m)), r.op));
        want[m].push_back(&results.back());
      }
      break;
    case CollectiveKind::kAllToAll:
      for (int m : r.members) want[m] = column(gr(m));
      break;
    case CollectiveKind::kScatter:
      for (int m : r.members) want[m].push_back(&r.inputs.at(r.root).at(gr(m)));
      break;
    case CollectiveKind::kGather:
      want[r.root] = in;
      break;
    case CollectiveKind::kAllGather:
      for (int m : r.members) want[m] = in;
      break;
    default:
      break;
  }
  return want;
}

bool inputs_complete(const CollectiveRecord& r) {
  if (r.kind == CollectiveKind::kScatter || r.kind == CollectiveKind::kBroadcast)
    return r.inputs.count(r.root) && !r.inputs.at(r.root).empty();
  // Block-wise ops: one input block per member, else the call was invalid.
  const bool block_wise = r.kind == CollectiveKind::kReduceScatter || r.kind == CollectiveKind::kAllToAll;
  for (int m : r.members)
    if (!r.inputs.count(m) || r.inputs.at(m).empty() || (block_wise && r.inputs.at(m).size() != r.members.size()))
      return false;
  return true;
}

}  // namespace

int check_collectives(const OpRecords& records, std::vector<Finding>& findings) {
  int checks = 0;
  for (const auto& [key, r] : records.collectives) {
    const auto& [group, seq] = key;
    // Only calls that every member issued and completed are judged here;
    // anything else is already visible as an error, a hang or a deadlock.
    bool complete = r.issued.size() == r.members.size();
    for (int m : r.members) complete = complete && r.outputs.count(m);
    if (!complete || r.kind == CollectiveKind::kBarrier || !inputs_complete(r)) continue;
    ++checks;
    const bool reduced = r.kind == CollectiveKind::kReduce || r.kind == CollectiveKind::kAllReduce ||
                         r.kind == CollectiveKind::kReduceScatter;
    const CompareRule rule{.reduced = reduced, .op = r.op, .contributors = static_cast<int>(r.members.size()),
                           .want_is = "the oracle says"};
    std::vector<Tensor> results;
    const std::map<int, std::vector<const Tensor*>> want = expected(r, results);
    const std::string call =
        (r.where.empty() ? "" : r.where + ": ") + collective_name(r.kind) + " #" + std::to_string(seq) + " on " + group;
    for (int m : r.members) {
      const auto& got = r.outputs.at(m);
      const auto it = want.find(m);
      static const std::vector<const Tensor*> kNone;
      const auto& exp = it == want.end() ? kNone : it->second;
      // What reduce leaves on the other ranks is collie's choice, not torch's.
      const bool unspecified = r.kind == CollectiveKind::kReduce && m != r.root;
      const Finding::Kind kind = unspecified ? Finding::Kind::kUnspecified : Finding::Kind::kViolation;
      if (got.size() != exp.size()) {
        findings.push_back({kind, call + ": rank " + std::to_string(m) + " has " + std::to_string(got.size()) +
                                      " output tensors, the oracle " + std::to_string(exp.size())});
        continue;
      }
      for (std::size_t k = 0; k < got.size(); ++k) {
        const std::string d = compare_tensors(got[k], *exp[k], unspecified ? CompareRule{.want_is = "the oracle says"} : rule);
        if (d.empty()) continue;
        std::string text = call + ": rank " + std::to_string(m) + (got.size() > 1 ? " entry " + std::to_string(k) : "") +
                           " " + d;
        if (unspecified)
          text += " (a non-destination rank of reduce: torch leaves its tensor unspecified; collie's core leaves it "
                  "unchanged)";
        findings.push_back({kind, std::move(text)});
        break;
      }
    }
    if (r.kind == CollectiveKind::kAllReduce) {
      const Tensor& first = r.outputs.at(r.members[0]).at(0);
      for (int m : r.members)
        if (!reference::bitwise_equal(first, r.outputs.at(m).at(0))) {
          findings.push_back({Finding::Kind::kUnspecified,
                              call + ": results differ between rank " + std::to_string(r.members[0]) + " and rank " +
                                  std::to_string(m) +
                                  " (collie's core gives identical bits everywhere; torch does not promise it)"});
          break;
        }
    }
  }
  return checks;
}

int check_p2p(const OpRecords& records, std::vector<Finding>& findings) {
  std::map<std::tuple<int, int, std::string, int>, std::vector<const RecvRecord*>> by_channel;
  for (const RecvRecord& r : records.recvs) by_channel[{r.source, r.rank, r.group, r.tag}].push_back(&r);
  int checks = 0;
  for (auto& [key, rs] : by_channel) {
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->order < b->order; });
    auto it = records.sends.find(key);
    for (std::size_t k = 0; k < rs.size(); ++k) {
      ++checks;
      const RecvRecord& r = *rs[k];
      const std::string who = (r.where.empty() ? "" : r.where + ": ") + "rank " + std::to_string(r.rank) +
                              ": receive from rank " + std::to_string(r.source) + " (tag " + std::to_string(r.tag) +
                              " on " + r.group + ")";
      if (it == records.sends.end() || k >= it->second.size()) {
        findings.push_back({Finding::Kind::kViolation, who + " has no matching send"});
        continue;
      }
      if (!reference::bitwise_equal(r.data, it->second[k]))
        findings.push_back({Finding::Kind::kViolation,
                            who + " holds data that differs from what was sent: " +
                                compare_tensors(r.data, it->second[k], CompareRule{.bitwise = true})});
    }
  }
  return checks;
}

}  // namespace collie::check
