#include "conformance/collective_check.h"

#include <algorithm>
#include <regex>
#include <map>
#include <set>
#include <memory>

#include "check/call_recorder.h"
#include "check/op_checks.h"
#include "conformance/case_calls.h"
#include "core/communicator.h"
#include "core/error.h"

namespace collie::conformance {

namespace {

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

// How the checks judge a case's values (check/op_records.h).
check::CollectiveRecord::Judging judging(const CollectiveCase& c, std::size_t members, bool strict) {
  check::CollectiveRecord::Judging j;
  // Values that need rounding are exact still where nothing is reduced:
  // a collective that only moves them must deliver every bit.
  const bool reduces = c.op == CollectiveKind::kAllReduce || c.op == CollectiveKind::kReduce ||
                       c.op == CollectiveKind::kReduceScatter;
  // Special values likewise: moved, a NaN's payload and a zero's sign are
  // the program's bytes (torch leaves them open only where it computes).
  j.exact = !(c.rounding && reduces) && !(c.special_values && reduces);
  j.special_values = c.special_values && reduces;
  // Inexact inputs in a forced butterfly: collie's core must give that
  // order's bits; a library picks its own order and algorithm.
  if (strict && c.rounding && c.op == CollectiveKind::kAllReduce &&
      (c.reduce_op == ReduceOp::kSum || c.reduce_op == ReduceOp::kProduct))
    j.butterfly = butterfly_distances(c.algorithm, members);
  return j;
}

// The group label a case's records are keyed by, as reports name it.
std::string group_label(const CollectiveCase& c, int world) {
  if (c.group.empty()) return "world";
  std::string s = "{";
  const std::vector<int> m = case_members(c, world);
  for (std::size_t i = 0; i < m.size(); ++i) s += (i ? "," : "") + std::to_string(m[i]);
  return s + "}";
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


// How a traffic run ended: the run's failure, else the first wrong value.
CaseOutcome traffic_outcome(const RunResult& res, std::string failure, const std::string& context) {
  if (!res.ok()) return failed_run(res, context);
  CaseOutcome out;
  out.failure = std::move(failure);
  return out;
}

// "rank 1: message 4 from rank 0 (tag 2) element 3 is 7, expected 8".
std::string wrong_element(int rank, const std::string& message, int src, int tag, std::size_t element,
                          std::int64_t got, std::int64_t expected) {
  return "rank " + std::to_string(rank) + ": message " + message + " from rank " + std::to_string(src) + " (tag " +
         std::to_string(tag) + ") element " + std::to_string(element) + " is " + std::to_string(got) +
         ", expected " + std::to_string(expected);
}

RunOnEveryRank on_local_world(LocalWorld& world, const std::string& context) {
  return [&world, context](const DistProgram& program) {
    return world.run([&program](Communicator& c) { return program(c); }, context);
  };
}

bool is_barrier(const CollectiveCase& c) {
  return c.op == CollectiveKind::kBarrier || c.op == CollectiveKind::kMonitoredBarrier;
}

std::string strict_failure(const CaseOutcome& o) {
  if (!o.skipped.empty()) return "skipped: " + o.skipped;
  return o.failure;
}

}  // namespace

CaseOutcome failed_run(const RunResult& res, const std::string& context) {
  CaseOutcome out;
  out.skipped = unsupported(res);
  if (out.skipped.empty()) out.failure = "run failed" + (context.empty() ? "" : " (" + context + ")") + ": " + res.describe();
  return out;
}

CaseOutcome run_and_check(const RunOnEveryRank& run, int W, const std::vector<CollectiveCase>& cases, bool strict,
                          const std::string& context, bool library) {
  // Every rank's calls, made before the run (the buffers outlive it).
  std::vector<std::vector<CaseCall>> calls(static_cast<std::size_t>(W));
  for (int r = 0; r < W; ++r)
    for (const CollectiveCase& c : cases) calls[static_cast<std::size_t>(r)].push_back(case_call(c, r, W));
  check::OpRecords records;
  // Barriers: how many members have entered each case's, counted by every
  // rank's program (they all run in this process), and the first member
  // found to have left one before every member entered.
  std::vector<std::size_t> entered(cases.size());
  std::string left_early;
  // A case's delay is sized for a library's rank processes (a loaded machine
  // may keep one off its core for 100 ms); collie's core answers within a
  // millisecond, in one process or on the simulator's clock, so it waits
  // 50 ms at most (a suite on tcp waited 4 s on barrier_entry alone).
  auto delay_of = [library](const CollectiveCase& c) {
    return library ? c.late_ns : std::min<Nanos>(c.late_ns, 50'000'000);
  };
  const bool any_late =
      std::any_of(cases.begin(), cases.end(), [](const CollectiveCase& c) { return c.late_rank >= 0; });

  auto program = [&](Dist& comm) -> Task<void> {
    const auto me = static_cast<std::size_t>(comm.rank());
    check::CallRecorder recorder(records, comm.rank(), W);
    // One group per distinct list (each costs a library a rendezvous).
    std::vector<Group> groups;
    std::map<std::vector<int>, Group> made;
    for (const CollectiveCase& c : cases) {
      if (c.group.empty()) {
        groups.emplace_back();
        continue;
      }
      auto it = made.find(c.group);
      if (it == made.end()) it = made.emplace(c.group, comm.new_group(c.group)).first;
      groups.push_back(it->second);
    }
    if (any_late) {
      // A start line: every rank's implementation has made the groups
      // (for a library, a rendezvous that may take longer than the late
      // rank's delay) before the late rank starts its delay.
      Tensor mark(DType::kFloat32, {1});
      co_await comm.all_reduce(mark, ReduceOp::kSum);
    }
    std::vector<Work> works;
    std::vector<std::function<void(const Work&)>> recorded;
    for (std::size_t k = 0; k < cases.size(); ++k) {
      // The late rank issues the calls before its case on time, then waits
      // (a barrier that returned at once only right after another barrier
      // passed a late rank that was late for both).
      if (cases[k].late_rank == comm.rank()) co_await sleep_for(comm.executor(), delay_of(cases[k]));
      DistCall& call = calls[me][k].call;
      call.group = groups[k];
      const std::vector<int> member_list = case_members(cases[k], W);
      const int members = static_cast<int>(member_list.size());
      recorded.push_back(recorder.before(call, group_label(cases[k], W), cases[k].describe(!library, members)));
      // Members only: a rank outside the group also makes the call (and is
      // answered not_member), and counting it let a barrier that released
      // its members at once pass whenever the outsiders called first.
      const bool member = std::find(member_list.begin(), member_list.end(), comm.rank()) != member_list.end();
      if (is_barrier(cases[k]) && member) ++entered[k];
      // An async barrier issued before its late member called it cannot
      // have completed yet: a rank's worker checks the library's handle
      // (a Work.is_completed() that said True at once passed).
      // The late member's own call not yet made here (entered counts the
      // calls made so far) keeps a rank the machine stalled out of it.
      call.must_be_pending = is_barrier(cases[k]) && cases[k].async_op && member && cases[k].late_rank >= 0 &&
                             cases[k].late_rank != comm.rank() && entered[k] < member_list.size();
      call.poll_ns = cases[k].async_op && cases[k].polled && cases[k].late_rank < 0 ? CollectiveCase::kPollNs : 0;
      works.push_back(dispatch(comm, call));
      recorder.issued(works.back());
    }
    std::exception_ptr first;
    for (std::size_t k = 0; k < works.size(); ++k) {
      try {
        co_await works[k];
      } catch (...) {
        if (!first) first = std::current_exception();
        continue;
      }
      const std::vector<int> members = case_members(cases[k], W);
      if (!is_barrier(cases[k]) || works[k].not_member() || entered[k] >= members.size() || !left_early.empty())
        continue;
      left_early = cases[k].describe(!library) + ": rank " + std::to_string(comm.rank()) + " left the " +
                   std::string(op_spec(cases[k].op_kind()).name) + " when " + std::to_string(entered[k]) + " of its " +
                   std::to_string(members.size()) + " members had entered" +
                   (cases[k].late_rank >= 0 ? " (rank " + std::to_string(cases[k].late_rank) + " entered " +
                                                  std::to_string(delay_of(cases[k]) / 1'000'000) + " ms late)"
                                            : std::string()) +
                   ": a barrier releases no member before every member entered";
    }
    if (first) std::rethrow_exception(first);
    for (std::size_t k = 0; k < works.size(); ++k)
      if (recorded[k]) recorded[k](works[k]);
  };
  const RunResult res = run(program);
  if (!res.ok()) {
    // The calls as the case made them (an error names the op, not its
    // arguments: an uneven all_to_all's split sizes, say).
    std::string calls_made = context;
    for (std::size_t k = 0; k < cases.size() && k < 3; ++k)
      calls_made += (calls_made.empty() ? "" : "; ") +
                    cases[k].describe(!library, static_cast<int>(case_members(cases[k], W).size()));
    if (cases.size() > 3) calls_made += "; ... " + std::to_string(cases.size() - 3) + " more calls";
    return failed_run(res, calls_made);
  }
  if (!left_early.empty()) {
    CaseOutcome out;
    out.failure = left_early + (context.empty() ? "" : " (" + context + ")");
    return out;
  }

  // Case k is call number (earlier cases on its group) + 1 there.
  std::map<std::string, std::uint64_t> seq;
  for (const CollectiveCase& c : cases) {
    const std::string label = group_label(c, W);
    auto it = records.collectives.find({label, ++seq[label]});
    if (it != records.collectives.end()) it->second.judging = judging(c, it->second.members.size(), strict);
  }
  std::vector<check::Finding> findings;
  check::check_buffers(records, findings);
  check::check_collectives(records, findings);
  CaseOutcome out;
  for (const check::Finding& f : findings) {
    const std::string text = context.empty() ? f.text : f.text + " (" + context + ")";
    if (f.kind == check::Finding::Kind::kViolation || strict) {
      if (out.failure.empty()) out.failure = text;
    } else {
      out.notes.push_back(text);
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
          failure = wrong_element(c.rank(), std::to_string(k), expect[k].src, expect[k].tag, x, in[k].get_int(x),
                                  expect[k].value + static_cast<std::int64_t>(x)) +
                    " (a message overtook another, or was corrupted)";
          break;
        }
    co_await wait_all(works);
  };
  const RunResult res = run(program);
  return traffic_outcome(res, failure, context);
}

CaseOutcome run_long_stream(const RunOnEveryRank& run, int W, int messages, int window, const std::string& context,
                            bool batched) {
  if (W < 2) return {};
  // Message k of rank r: its count and element x.
  auto count_of = [](int k) -> std::size_t { return k % 97 == 96 ? 9000 : 1 + static_cast<std::size_t>(k % 4); };
  auto value = [](int r, int k, std::size_t x) {
    return std::int64_t{r} * 1'000'000'000'000 + std::int64_t{k} * 10'000 + static_cast<std::int64_t>(x);
  };
  std::string failure;
  auto program = [&](Dist& c) -> Task<void> {
    const int me = c.rank(), next = (me + 1) % W, prev = (me + W - 1) % W;
    for (int first = 0; first < messages; first += window) {
      const int n = std::min(window, messages - first);
      std::vector<Tensor> out, in;
      out.reserve(static_cast<std::size_t>(n));
      in.reserve(static_cast<std::size_t>(n));
      std::vector<Work> sends, recvs;
      std::vector<P2POp> batch;
      for (int k = first; k < first + n; ++k) {
        const auto count = static_cast<std::int64_t>(count_of(k));
        in.emplace_back(DType::kInt64, std::vector<std::int64_t>{count});
        out.emplace_back(DType::kInt64, std::vector<std::int64_t>{count});
        for (std::size_t x = 0; x < count_of(k); ++x) out.back().set_int(x, value(me, k, x));
        if (batched) {
          batch.push_back(P2POp{false, in.back(), prev, k % 5});
          batch.push_back(P2POp{true, out.back(), next, k % 5});
          continue;
        }
        recvs.push_back(c.irecv(in.back(), prev, k % 5));
        sends.push_back(c.isend(out.back(), next, k % 5));
      }
      if (batched) recvs.push_back(c.batch_isend_irecv(batch));
      co_await wait_all(recvs);
      for (int i = 0; i < n && failure.empty(); ++i) {
        const int k = first + i;
        for (std::size_t x = 0; x < count_of(k); ++x) {
          const std::int64_t got = in[static_cast<std::size_t>(i)].get_int(x);
          if (got == value(prev, k, x)) continue;
          failure = wrong_element(me, std::to_string(k) + " of " + std::to_string(messages), prev, k % 5, x, got,
                                  value(prev, k, x));
          break;
        }
      }
      co_await wait_all(sends);
    }
  };
  const RunResult res = run(program);
  return traffic_outcome(res, failure, context);
}

namespace {

// The text of `e` and whether it is a collie timeout.
std::pair<std::string, bool> error_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return {x.what(), x.kind() == ErrorKind::kTimeout};
  } catch (const std::exception& x) {
    return {x.what(), false};
  }
  return {"a non-standard exception", false};
}

}  // namespace

CaseOutcome run_batch_traffic(const RunOnEveryRank& run, int W, sim::Prng& prng, int per_rank,
                              const std::string& context) {
  if (W < 2) return {};
  struct Msg {
    int src, dst, tag;
    std::size_t count;
    std::int64_t value;
  };
  std::vector<Msg> msgs;
  for (int r = 0; r < W; ++r)
    for (int i = 0; i < per_rank; ++i) {
      int dst = static_cast<int>(prng.below(static_cast<std::uint64_t>(W - 1)));
      if (dst >= r) ++dst;
      static constexpr std::size_t kSizes[] = {0, 1, 3, 100, 20000};
      msgs.push_back(Msg{r, dst, static_cast<int>(prng.below(3) * 1000003), kSizes[prng.below(5)],
                         std::int64_t{r} * 1000000 + i});
    }
  // A group of every rank, named in a random order: the same members.
  std::vector<int> named(static_cast<std::size_t>(W));
  for (int r = 0; r < W; ++r) named[static_cast<std::size_t>(r)] = r;
  for (std::size_t i = named.size(); i > 1; --i) std::swap(named[i - 1], named[prng.below(i)]);
  std::vector<bool> reverse_tags(static_cast<std::size_t>(W));
  for (auto&& b : reverse_tags) b = prng.below(2) == 1;
  std::string failure;
  auto program = [&](Dist& c) -> Task<void> {
    const int me = c.rank();
    const Group g = c.new_group(named, 0, "shuffled");
    std::vector<Msg> in;
    for (const Msg& m : msgs)
      if (m.dst == me) in.push_back(m);
    if (reverse_tags[static_cast<std::size_t>(me)])
      std::stable_sort(in.begin(), in.end(), [](const Msg& a, const Msg& b) { return a.tag > b.tag; });
    std::vector<Tensor> buffers;
    buffers.reserve(msgs.size());
    std::vector<P2POp> ops;
    for (const Msg& m : in) {
      buffers.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(m.count)});
      ops.push_back(P2POp{false, buffers.back(), m.src, m.tag});
    }
    for (const Msg& m : msgs) {
      if (m.src != me) continue;
      buffers.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(m.count)});
      for (std::size_t k = 0; k < m.count; ++k) buffers.back().set_int(k, m.value + static_cast<std::int64_t>(k));
      ops.push_back(P2POp{true, buffers.back(), m.dst, m.tag});
    }
    co_await c.batch_isend_irecv(ops, g);
    for (std::size_t k = 0; k < in.size() && failure.empty(); ++k)
      for (std::size_t x = 0; x < in[k].count; ++x)
        if (buffers[k].get_int(x) != in[k].value + static_cast<std::int64_t>(x)) {
          failure = "batch_isend_irecv: rank " + std::to_string(me) + ": receive " + std::to_string(k) +
                    " from rank " + std::to_string(in[k].src) + " (tag " + std::to_string(in[k].tag) + ", " +
                    std::to_string(in[k].count) + " elements) element " + std::to_string(x) + " is " +
                    std::to_string(buffers[k].get_int(x)) + ", expected " +
                    std::to_string(in[k].value + static_cast<std::int64_t>(x)) +
                    " (a message overtook another, or was corrupted)";
          break;
        }
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, context);
  CaseOutcome out;
  out.failure = failure;
  return out;
}

CaseOutcome run_monitored_barrier(const RunOnEveryRank& run, int W, sim::Prng& prng, Nanos timeout_ns, bool strict,
                                  const std::string& context) {
  // A group in a random order; members stay away at random.
  std::vector<int> named;
  for (int r = 0; r < W; ++r)
    if (prng.below(3) != 0) named.push_back(r);
  if (named.empty()) named.push_back(static_cast<int>(prng.below(static_cast<std::uint64_t>(W))));
  for (std::size_t i = named.size(); i > 1; --i) std::swap(named[i - 1], named[prng.below(i)]);
  std::vector<int> members = named;
  std::sort(members.begin(), members.end());
  const int first = members[0];
  std::set<int> away;
  for (std::size_t i = 1; i < members.size(); ++i)
    if (prng.below(3) == 0) away.insert(members[i]);
  const bool wait_all = prng.below(2) == 1;
  std::string what = "monitored_barrier on {";
  for (std::size_t i = 0; i < named.size(); ++i) what += (i ? "," : "") + std::to_string(named[i]);
  what += "}, ranks away {";
  for (auto it = away.begin(); it != away.end(); ++it) what += (it == away.begin() ? "" : ",") + std::to_string(*it);
  what += "}" + std::string(wait_all ? ", wait_all_ranks" : "");
  const std::string why = what + (context.empty() ? "" : " (" + context + ")");

  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "monitored");
    if (!away.count(c.rank())) co_await c.monitored_barrier(g, timeout_ns, wait_all);
  };
  const RunResult res = run(program);
  CaseOutcome out;
  out.skipped = unsupported(res);
  if (!out.skipped.empty()) return out;
  // What the first member's error must name: collie's core names global
  // ranks in its own words; a library names them its own way (torch's Gloo
  // says "Ranks 1, 2 failed to pass monitoredBarrier" with group ranks).
  std::vector<int> named_missing(away.begin(), away.end());
  if (!wait_all && !named_missing.empty()) named_missing.resize(1);
  std::vector<int> as_group_ranks;
  for (int r : named_missing)
    as_group_ranks.push_back(static_cast<int>(std::lower_bound(members.begin(), members.end(), r) - members.begin()));
  auto listed = [](const std::vector<int>& ranks) {
    std::string list;
    for (std::size_t i = 0; i < ranks.size(); ++i) list += (i ? ", " : "") + std::to_string(ranks[i]);
    return (ranks.size() == 1 ? "rank " : "ranks ") + list;
  };
  const std::string expected = listed(named_missing) + " did not arrive";
  // "rank 3", "Ranks 3", "ranks 1, 3" anywhere in a library's text.
  auto names = [](const std::string& text, const std::vector<int>& ranks) {
    std::string pattern = "ranks?\\s+";
    for (std::size_t i = 0; i < ranks.size(); ++i) pattern += (i ? ",\\s*" : "") + std::to_string(ranks[i]);
    return std::regex_search(text, std::regex(pattern + "\\b", std::regex::icase));
  };
  for (int r = 0; r < W && out.failure.empty(); ++r) {
    const RankOutcome& o = res.ranks.at(static_cast<std::size_t>(r));
    const bool member = std::binary_search(members.begin(), members.end(), r);
    if (!o.error) {
      if (member && !away.count(r) && !away.empty())
        out.failure = why + ": rank " + std::to_string(r) + " left the barrier though ranks never arrived";
      continue;
    }
    const auto [text, timeout] = error_of(o.error);
    if (away.empty() || !member || away.count(r)) {
      out.failure = why + ": rank " + std::to_string(r) + " failed: " + text;
      continue;
    }
    if (r != first) continue;  // a member waiting for release fails in its own words
    if (strict) {
      if (!timeout || text.find(expected) == std::string::npos)
        out.failure = why + ": the first member, rank " + std::to_string(r) + ", must fail with a timeout saying '" +
                      expected + "'; it failed with: " + text;
    } else if (!names(text, named_missing)) {
      const bool group_ranks = names(text, as_group_ranks);
      out.notes.push_back(why + ": the first member's error " +
                          (group_ranks ? "names the missing members by their group ranks (" +
                                             listed(as_group_ranks) + "), not their global ranks; torch's Gloo does too"
                                       : "does not name " + listed(named_missing) + " as collie reads it") +
                          ": " + text);
    }
  }
  return out;
}

}  // namespace collie::conformance
