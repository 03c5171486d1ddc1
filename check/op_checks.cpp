#include "check/op_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

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

// Element-wise sum of |x| over `in` (float64): how large the operands of
// each element of a reduction were, bounding its rounding under
// cancellation.
Tensor magnitude_sum(const std::vector<const Tensor*>& in) {
  Tensor m(DType::kFloat64, {static_cast<std::int64_t>(in.empty() ? 0 : in[0]->count())});
  for (std::size_t i = 0; i < m.count(); ++i) {
    double sum = 0;
    for (const Tensor* t : in) sum += std::fabs(t->get(i));
    m.set(i, sum);
  }
  return m;
}

// Element i of t as a tensor of one element.
Tensor element(const Tensor& t, std::size_t i) {
  Tensor one(t.dtype(), {1});
  const std::size_t es = dtype_size(t.dtype());
  std::memcpy(one.data(), static_cast<const std::byte*>(t.data()) + i * es, es);
  return one;
}

// Special-value inputs: the first difference torch's semantics forbid
// (empty if none), with `note` the first it leaves open -- a NaN's sign or
// payload, a zero's sign, and whether MIN/MAX propagate NaN (collie's core
// does, as torch.minimum does; NCCL's and Gloo's need not).
std::string special_difference(const Tensor& got, const Tensor& want, bool min_max, std::string& note,
                               std::size_t* at) {
  const std::string loose = compare_tensors(got, want, CompareRule{.want_is = "the oracle says"}, at);
  if (!min_max || got.count() != want.count() || got.dtype() != want.dtype()) {
    if (loose.empty())
      note = compare_tensors(got, want, CompareRule{.bitwise = true, .want_is = "the oracle says"}) +
             " (only a NaN's sign or payload or a zero's sign differs: torch does not specify them; collie's core "
             "gives the canonical NaN and orders -0.0 below +0.0)";
    return loose;
  }
  for (std::size_t i = 0; i < got.count(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (g == w || (std::isnan(g) && std::isnan(w))) {
      if (note.empty()) {
        const std::string bits =
            compare_tensors(element(got, i), element(want, i), CompareRule{.bitwise = true, .want_is = "the oracle says"});
        if (!bits.empty())
          note = "element " + std::to_string(i) + bits.substr(bits.find(" is ")) +
                 " (a zero's sign or a NaN's bits: torch does not specify them; collie's core orders -0.0 below "
                 "+0.0 and gives the canonical NaN)";
      }
      continue;
    }
    if (std::isnan(w)) {
      if (note.empty())
        note = "element " + std::to_string(i) + " is " + format_item(got, i) +
               ", the oracle says nan (MIN/MAX does not propagate NaN here: torch does not specify it; collie's core "
               "does, as torch.minimum and torch.maximum do)";
      continue;
    }
    if (at) *at = i;
    return "element " + std::to_string(i) + " is " + format_item(got, i) + ", the oracle says " + format_item(want, i);
  }
  return {};
}

// How one output tensor differs from the oracle's, judged as the record
// asks: a violation (returned) or a difference torch leaves open (`note`).
std::string judge(const CollectiveRecord& r, const Tensor& got, const Tensor& want, const CompareRule& rule,
                  const std::vector<const Tensor*>& operands, std::string& note, std::size_t* at) {
  const CompareRule exact{.bitwise = true, .want_is = "the oracle says"};
  // Special values are compared bit for bit first: a NaN's or a zero's bits
  // that differ are a note even where the values are equal.
  std::string d = compare_tensors(got, want, r.judging.exact || r.judging.special_values ? exact : rule, at);
  if (d.empty()) return d;
  if (r.judging.special_values) {
    const bool min_max = rule.reduced && (rule.op == ReduceOp::kMin || rule.op == ReduceOp::kMax);
    return special_difference(got, want, min_max, note, at);
  }
  const bool sums = rule.op == ReduceOp::kSum || rule.op == ReduceOp::kAvg;
  if (!r.judging.exact && rule.reduced && sums && is_floating(got.dtype()) && !operands.empty()) {
    // Under cancellation a sum rounds relative to its operands, not to its result.
    const Tensor magnitudes = magnitude_sum(operands);
    CompareRule scaled = rule;
    scaled.magnitudes = &magnitudes;
    d = compare_tensors(got, want, scaled, at);
  }
  return d;
}

// What a wrong output needs to be understood without rerunning the case:
// for a reduction, each contributor's input at the wrong element; for
// data moved unchanged, whose input the output holds instead.
std::string provenance(const CollectiveRecord& r, const Tensor& got, const std::vector<const Tensor*>& operands,
                       std::optional<std::size_t> at) {
  constexpr std::size_t kShown = 8;
  if (!operands.empty()) {
    if (!at) return {};
    std::string s = " (inputs at element " + std::to_string(*at) + ":";
    for (std::size_t j = 0; j < operands.size() && j < kShown; ++j)
      s += (j ? ", rank " : " rank ") + std::to_string(r.members[j]) + " " +
           (*at < operands[j]->count() ? format_item(*operands[j], *at) : std::string("-"));
    if (operands.size() > kShown) s += ", ... " + std::to_string(operands.size() - kShown) + " more";
    return s + ")";
  }
  for (const auto& [rank, blocks] : r.inputs)
    for (std::size_t b = 0; b < blocks.size(); ++b)
      if (blocks[b].count() == got.count() && got.count() > 0 && reference::bitwise_equal(blocks[b], got)) {
        const auto g = std::lower_bound(r.members.begin(), r.members.end(), rank) - r.members.begin();
        return " (it holds rank " + std::to_string(rank) + "'s input" +
               (blocks.size() > 1 ? " block " + std::to_string(b) : std::string()) + ", group rank " +
               std::to_string(g) + ")";
      }
  return {};
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
    if (!complete || r.kind == CollectiveKind::kBarrier || r.kind == CollectiveKind::kMonitoredBarrier ||
        !inputs_complete(r))
      continue;
    ++checks;
    const bool reduced = r.kind == CollectiveKind::kReduce || r.kind == CollectiveKind::kAllReduce ||
                         r.kind == CollectiveKind::kReduceScatter;
    const CompareRule rule{.reduced = reduced, .op = r.op, .contributors = static_cast<int>(r.members.size()),
                           .want_is = "the oracle says"};
    std::vector<Tensor> results;
    const std::map<int, std::vector<const Tensor*>> want = expected(r, results);
    const std::string call =
        (r.where.empty() ? "" : r.where + ": ") + collective_name(r.kind) + " #" + std::to_string(seq) + " on " + group;
    // The operands behind each output of a reduction, for its rounding.
    auto operands_of = [&](int member, std::size_t k) {
      std::vector<const Tensor*> ops;
      if (!reduced) return ops;
      const auto gr = static_cast<std::size_t>(std::lower_bound(r.members.begin(), r.members.end(), member) -
                                                r.members.begin());
      const std::size_t block = r.kind == CollectiveKind::kReduceScatter ? gr : k;
      for (int m : r.members) ops.push_back(&r.inputs.at(m).at(block));
      return ops;
    };
    // all_reduce in a forced butterfly order: that order's bits.
    std::optional<Tensor> butterfly;
    if (r.kind == CollectiveKind::kAllReduce && !r.judging.butterfly.empty()) {
      std::vector<const Tensor*> in;
      for (int m : r.members) in.push_back(&r.inputs.at(m).at(0));
      butterfly = reference::pairwise_reduction(in, r.op, r.judging.butterfly);
    }
    for (int m : r.members) {
      const auto& got = r.outputs.at(m);
      const auto it = want.find(m);
      static const std::vector<const Tensor*> kNone;
      const auto& exp = it == want.end() ? kNone : it->second;
      // What reduce leaves on the other ranks is collie's choice, not torch's.
      const bool unspecified = r.kind == CollectiveKind::kReduce && m != r.root;
      const Finding::Kind kind = unspecified ? Finding::Kind::kUnspecified : Finding::Kind::kViolation;
      const std::string who = call + ": rank " + std::to_string(m);
      if (got.size() != exp.size()) {
        findings.push_back({kind, who + " has " + std::to_string(got.size()) + " output tensors, the oracle " +
                                      std::to_string(exp.size())});
        continue;
      }
      for (std::size_t k = 0; k < got.size(); ++k) {
        const std::string at = who + (got.size() > 1 ? " entry " + std::to_string(k) : "") + " ";
        if (butterfly) {
          const std::string bits = compare_tensors(got[k], *butterfly, CompareRule{.bitwise = true,
                                                                                   .want_is = "the butterfly gives"});
          if (bits.empty()) continue;
          if (compare_tensors(got[k], *butterfly, rule).empty()) {
            findings.push_back({Finding::Kind::kUnspecified,
                                at + bits + " (the forced algorithm combines in one butterfly order; another order "
                                            "rounds otherwise, which torch allows)"});
            break;
          }
        }
        std::string note;
        constexpr std::size_t unset = static_cast<std::size_t>(-1);
        std::size_t wrong = unset;
        const std::vector<const Tensor*> operands = operands_of(m, k);
        const std::string d = judge(r, got[k], *exp[k], unspecified ? CompareRule{.want_is = "the oracle says"} : rule,
                                    operands, note, &wrong);
        if (!note.empty()) findings.push_back({Finding::Kind::kUnspecified, at + note});
        if (d.empty()) continue;
        std::string text = at + d;
        if (!unspecified)
          text += provenance(r, got[k], operands, wrong == unset ? std::nullopt : std::optional<std::size_t>(wrong));
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
          // torch's all_reduce: "after the call tensor is going to be
          // bitwise identical in all processes" (replicas of a model stay
          // replicas); whatever the rounding, every member has the same bits.
          findings.push_back({Finding::Kind::kViolation,
                              call + ": results differ between rank " + std::to_string(r.members[0]) + " and rank " +
                                  std::to_string(m) +
                                  ": after all_reduce the tensor is bitwise identical on every member (torch's "
                                  "words), whatever order the implementation reduces in"});
          break;
        }
    }
  }
  return checks;
}

int check_buffers(const OpRecords& records, std::vector<Finding>& findings) {
  for (const std::string& f : records.buffer_findings) findings.push_back({Finding::Kind::kViolation, f});
  return static_cast<int>(records.buffer_findings.size());
}

namespace {

// Whether the call with op id `op` of `rank` is one it never issued.
bool never_made(const NeverIssued& never_issued, int rank, std::uint64_t op) {
  const auto it = never_issued.find(rank);
  return it != never_issued.end() && op != 0 && op >= it->second;
}

std::string killed_before(const NeverIssued& never_issued, int rank) {
  return "rank " + std::to_string(rank) + "'s process was killed before its op #" +
         std::to_string(never_issued.at(rank));
}

}  // namespace

int check_p2p(const OpRecords& records, std::vector<Finding>& findings, const NeverIssued& never_issued) {
  std::map<std::tuple<int, int, std::string, int>, std::vector<const RecvRecord*>> by_channel;
  for (const RecvRecord& r : records.recvs) by_channel[{r.source, r.rank, r.group, r.tag}].push_back(&r);
  int checks = 0;
  static const std::vector<SentMessage> kNone;
  for (auto& [key, rs] : by_channel) {
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->order < b->order; });
    const auto it = records.sends.find(key);
    const std::vector<SentMessage>& sent = it == records.sends.end() ? kNone : it->second;
    // A crashed sender's sends from its first unissued op on: never sent
    // (op ids grow in send order, so they end the list).
    std::size_t real = 0;
    while (real < sent.size() && !never_made(never_issued, std::get<0>(key), sent[real].op)) ++real;
    for (std::size_t k = 0; k < rs.size(); ++k) {
      ++checks;
      const RecvRecord& r = *rs[k];
      const std::string who = (r.where.empty() ? "" : r.where + ": ") + "rank " + std::to_string(r.rank) +
                              ": receive from rank " + std::to_string(r.source) + " (tag " + std::to_string(r.tag) +
                              " on " + r.group + ")";
      if (k >= real) {
        findings.push_back({Finding::Kind::kViolation,
                            k < sent.size() ? who + " completed, but rank " + std::to_string(r.source) +
                                                  " never sent the message it would match: " +
                                                  killed_before(never_issued, r.source) + ", the send"
                                            : who + " has no matching send"});
        continue;
      }
      if (!reference::bitwise_equal(r.data, sent[k].data))
        findings.push_back({Finding::Kind::kViolation,
                            who + " holds data that differs from what was sent: " +
                                compare_tensors(r.data, sent[k].data, CompareRule{.bitwise = true})});
    }
  }
  return checks;
}

int check_calls_never_made(const OpRecords& records, const NeverIssued& never_issued,
                           std::vector<Finding>& findings) {
  if (never_issued.empty()) return 0;
  int checks = 0;
  for (const auto& [key, r] : records.collectives) {
    const auto& [group, seq] = key;
    std::vector<int> absent;  // crashed members that never made this call
    for (int m : r.members) {
      if (!never_issued.count(m)) continue;
      const auto op = r.op_ids.find(m);
      if (!r.issued.count(m) || (op != r.op_ids.end() && never_made(never_issued, m, op->second)))
        absent.push_back(m);
    }
    if (absent.empty()) continue;
    ++checks;
    auto group_rank = [&](int global) {
      return static_cast<std::size_t>(std::lower_bound(r.members.begin(), r.members.end(), global) -
                                      r.members.begin());
    };
    for (const auto& [survivor, outputs] : r.outputs) {
      if (std::find(absent.begin(), absent.end(), survivor) != absent.end()) continue;
      std::size_t elements = 0;
      for (const Tensor& t : outputs) elements += t.count();
      for (int a : absent) {
        bool needs = false;
        switch (r.kind) {
          case CollectiveKind::kBarrier:
          case CollectiveKind::kMonitoredBarrier: needs = true; break;
          case CollectiveKind::kAllReduce:
          case CollectiveKind::kAllGather:
          case CollectiveKind::kReduceScatter: needs = elements > 0; break;
          case CollectiveKind::kBroadcast:
          case CollectiveKind::kScatter: needs = r.root == a && elements > 0; break;
          case CollectiveKind::kReduce: needs = r.root == survivor && elements > 0; break;
          case CollectiveKind::kGather:
          case CollectiveKind::kAllToAll: {
            const std::size_t block = group_rank(a);
            needs = (r.kind == CollectiveKind::kAllToAll || r.root == survivor) && block < outputs.size() &&
                    outputs[block].count() > 0;
            break;
          }
          default: break;
        }
        if (!needs) continue;
        findings.push_back({Finding::Kind::kViolation,
                            (r.where.empty() ? "" : r.where + ": ") + collective_name(r.kind) + " #" +
                                std::to_string(seq) + " on " + group + ": rank " + std::to_string(survivor) +
                                " completed it, but rank " + std::to_string(a) + " never called it (" +
                                killed_before(never_issued, a) + "): the result cannot hold rank " +
                                std::to_string(a) + "'s part"});
        break;
      }
    }
  }
  return checks;
}

}  // namespace collie::check
