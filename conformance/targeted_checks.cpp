#include "conformance/targeted_checks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include "core/error.h"

namespace collie::conformance {

namespace {

std::string with_context(const std::string& text, const std::string& context) {
  return context.empty() ? text : text + " (" + context + ")";
}

std::string list_of(const std::vector<int>& ranks) {
  std::string s = "{";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "}";
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

int group_rank(const std::vector<int>& members, int global) {
  return static_cast<int>(std::lower_bound(members.begin(), members.end(), global) - members.begin());
}

// What to add when a receive reports `source` for `sender`'s message: the
// common slip, a group rank where torch reports the global one, named.
std::string group_rank_hint(const std::vector<int>& members, int sender, int source) {
  if (source != group_rank(members, sender)) return "";
  return ": the source is the sender's group rank; torch reports the global rank (dist.recv returns it; rank " +
         std::to_string(sender) + " is group rank " + std::to_string(source) + ")";
}

std::string ms_text(Nanos ns) { return std::to_string(ns / 1'000'000) + " ms"; }

// One call that is expected to fail at a deadline: whether it failed, with
// what, and after how long from `t0` (the executor's clock before the call
// was made).
struct TimedCall {
  bool failed = false;
  std::string error;
  Nanos elapsed = -1;
};

Task<void> await_timed(Executor& e, Nanos t0, Work w, TimedCall& out) {
  try {
    co_await w;
  } catch (const std::exception& x) {
    out.failed = true;
    out.error = x.what();
  }
  out.elapsed = e.now() - t0;
}

// Element x of message i from `sender`: who sent it and which it is can be
// read back from any element.
std::int64_t message_value(int sender, int i, std::size_t x) {
  return std::int64_t{sender} * 1'000'000'000 + std::int64_t{i} * 1'000'000 + static_cast<std::int64_t>(x % 1'000'000);
}

// The same in float64, a quarter above: a value carried through an integer
// (or float32) loses the quarter (or the low digits).
double float_message_value(int sender, int i, std::size_t x) {
  return static_cast<double>(message_value(sender, i, x)) + 0.25;
}

Tensor message(int sender, int i, std::size_t count, DType dtype = DType::kInt64) {
  Tensor t(dtype, {static_cast<std::int64_t>(count)});
  for (std::size_t x = 0; x < count; ++x) {
    if (dtype == DType::kFloat64) t.set(x, float_message_value(sender, i, x));
    else t.set_int(x, message_value(sender, i, x));
  }
  return t;
}

// Element x of a received message as the int64 message_value() it stands
// for; a float64 one that is not a quarter above one gives -1.
std::int64_t value_of(const Tensor& t, std::size_t x) {
  if (t.dtype() != DType::kFloat64) return t.get_int(x);
  const double v = t.get(x);
  const double whole = v - 0.25;
  if (whole < 0 || whole != static_cast<double>(static_cast<std::int64_t>(whole))) return -1;
  return static_cast<std::int64_t>(whole);
}

std::string float_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string text_of(const Tensor& t, std::size_t x) {
  return t.dtype() == DType::kFloat64 ? float_text(t.get(x)) : std::to_string(t.get_int(x));
}

}  // namespace

CaseOutcome run_any_source(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int receiver,
                           int per_sender, std::size_t count, bool async, const std::string& context, DType dtype) {
  const std::vector<int> members = sorted(named);
  const int senders = static_cast<int>(members.size()) - 1;
  const std::string what = std::string(async ? "irecv" : "recv") + " from any source by rank " +
                           std::to_string(receiver) + " on " + list_of(members) + " (named " + list_of(named) + "), " +
                           std::to_string(per_sender) + " messages of " + std::string(dtype_name(dtype)) + " x " +
                           std::to_string(count) + " from each other member";
  struct Got {
    int source;
    Tensor data;
  };
  std::vector<Got> got;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "any_source");
    const int me = c.rank();
    if (!std::binary_search(members.begin(), members.end(), me)) co_return;
    constexpr int kTag = 7;
    if (me != receiver) {
      std::vector<Tensor> out;
      out.reserve(static_cast<std::size_t>(per_sender));
      std::vector<Work> sends;
      for (int i = 0; i < per_sender; ++i) {
        out.push_back(message(me, i, count, dtype));
        sends.push_back(c.isend(out.back(), receiver, kTag, g));
      }
      co_await wait_all(sends);
      co_return;
    }
    const auto total = static_cast<std::size_t>(per_sender * senders);
    std::vector<Tensor> in;
    in.reserve(total);
    for (std::size_t k = 0; k < total; ++k) in.emplace_back(dtype, std::vector<std::int64_t>{static_cast<std::int64_t>(count)});
    std::vector<Work> recvs;
    for (std::size_t k = 0; k < total; ++k) {
      if (async) {
        recvs.push_back(c.irecv(in[k], kAnySource, kTag, g));
        continue;
      }
      Work w = c.recv(in[k], kAnySource, kTag, g);
      co_await w;
      recvs.push_back(w);
    }
    co_await wait_all(recvs);
    for (std::size_t k = 0; k < total; ++k) got.push_back(Got{recvs[k].source_rank(), in[k]});
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  auto fail = [&](const std::string& why) {
    if (out.failure.empty()) out.failure = with_context(what + ": " + why, context);
  };
  std::map<int, int> next;  // sender -> the message index it must deliver next
  for (std::size_t k = 0; k < got.size() && out.failure.empty(); ++k) {
    const Got& r = got[k];
    const std::int64_t first = count ? value_of(r.data, 0) : 0;
    const int sender = first < 0 ? -1 : static_cast<int>(first / 1'000'000'000);
    const int index = static_cast<int>((first / 1'000'000) % 1000);
    const std::string receive = "receive " + std::to_string(k);
    if (!std::binary_search(members.begin(), members.end(), sender) || sender == receiver) {
      std::string why = receive + " holds element 0 = " + text_of(r.data, 0) + ", which no member sent";
      if (dtype == DType::kFloat64 && count && std::trunc(r.data.get(0)) == r.data.get(0))
        why += " (each value sent was a quarter above an integer: the quarter was lost, as if carried through an "
               "integer)";
      fail(why);
      break;
    }
    if (r.source != sender) {
      std::string why = receive + " reports source " + std::to_string(r.source) + ", but it holds rank " +
                        std::to_string(sender) + "'s message " + std::to_string(index);
      fail(why + group_rank_hint(members, sender, r.source));
      break;
    }
    for (std::size_t x = 0; x < count; ++x)
      if (value_of(r.data, x) != message_value(sender, index, x)) {
        fail(receive + " (rank " + std::to_string(sender) + "'s message " + std::to_string(index) + ") element " +
             std::to_string(x) + " is " + text_of(r.data, x) + ", it was sent as " +
             (dtype == DType::kFloat64 ? float_text(float_message_value(sender, index, x))
                                       : std::to_string(message_value(sender, index, x))));
        break;
      }
    if (index != next[sender])
      fail(receive + " holds rank " + std::to_string(sender) + "'s message " + std::to_string(index) + " where its message " +
           std::to_string(next[sender]) + " was due: messages of one sender on one tag must not overtake each other" +
           (index < next[sender] ? " (or it arrived twice)" : ""));
    next[sender] = index + 1;
  }
  for (int s : members)
    if (out.failure.empty() && s != receiver && next[s] != per_sender)
      fail("rank " + std::to_string(s) + "'s messages arrived " + std::to_string(next[s]) + " times of " +
           std::to_string(per_sender));
  return out;
}

CaseOutcome run_empty_sources(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int receiver,
                              bool async, const std::string& context) {
  const std::vector<int> members = sorted(named);
  const std::string what = std::string(async ? "irecv" : "recv") + " of an empty message from any source by rank " +
                           std::to_string(receiver) + " on " + list_of(members) + " (named " + list_of(named) +
                           "), each member sending on tag 100 + its rank";
  std::vector<std::pair<int, int>> got;  // (the sender the tag names, the source reported)
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "empty_sources");
    const int me = c.rank();
    if (!std::binary_search(members.begin(), members.end(), me)) co_return;
    if (me != receiver) {
      Tensor nothing(DType::kInt64, {0});
      co_await c.send(nothing, receiver, 100 + me, g);
      co_return;
    }
    std::vector<Tensor> in;
    std::vector<int> senders;
    for (int s : members)
      if (s != receiver) senders.push_back(s);
    for (std::size_t k = 0; k < senders.size(); ++k) in.emplace_back(DType::kInt64, std::vector<std::int64_t>{0});
    std::vector<Work> recvs;
    for (std::size_t k = 0; k < senders.size(); ++k) {
      recvs.push_back(async ? c.irecv(in[k], kAnySource, 100 + senders[k], g)
                            : c.recv(in[k], kAnySource, 100 + senders[k], g));
      if (!async) co_await recvs.back();
    }
    co_await wait_all(recvs);
    for (std::size_t k = 0; k < senders.size(); ++k) got.emplace_back(senders[k], recvs[k].source_rank());
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  for (const auto& [sender, source] : got)
    if (source != sender) {
      out.failure = with_context(what + ": the receive on tag " + std::to_string(100 + sender) + " reports source " +
                                     std::to_string(source) + ", but only rank " + std::to_string(sender) +
                                     " sends on that tag" + group_rank_hint(members, sender, source),
                                 context);
      break;
    }
  return out;
}

std::vector<int> tag_range() {
  return {0, 1, 1 + (1 << 16), 1 + (1 << 24), 1 + (1 << 30), (1 << 30) - 1, 0x7fffffff};
}

CaseOutcome run_tag_range(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int sender, int receiver,
                          bool async, const std::string& context, bool any_source) {
  const std::vector<int> tags = tag_range();
  auto count_of = [](std::size_t i) { return i == 0 ? std::size_t{65537} : std::size_t{3}; };
  std::string what = std::string(async ? "irecv" : "recv") + " by rank " + std::to_string(receiver) + " from " +
                     (any_source ? "any source (rank " + std::to_string(sender) + " sends)"
                                 : "rank " + std::to_string(sender)) +
                     " on " + list_of(sorted(named)) + " with tags";
  for (int t : tags) what += " " + std::to_string(t);
  what += ", tag 0 sent last, received in the reverse order of the isends";
  // The send order: tag 0 last, so that its receive, the first posted,
  // meets every other message unmatched (a tag-0 receive from a named source
  // that matched any tag passed while tag 0 was sent first).
  std::vector<std::size_t> order;
  for (std::size_t i = 1; i < tags.size(); ++i) order.push_back(i);
  order.push_back(0);
  std::vector<Tensor> in;
  std::vector<int> sources;  // each receive's reported source, in tags' order
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "tags");
    const int me = c.rank();
    if (me == sender) {
      std::vector<Tensor> out;
      out.reserve(tags.size());
      std::vector<Work> sends;
      for (std::size_t i : order) {
        out.push_back(message(me, static_cast<int>(i), count_of(i)));
        sends.push_back(c.isend(out.back(), receiver, tags[i], g));
      }
      co_await wait_all(sends);
    } else if (me == receiver) {
      in.clear();
      for (std::size_t i = 0; i < tags.size(); ++i)
        in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(count_of(i))});
      std::vector<Work> recvs;
      const int from = any_source ? kAnySource : sender;
      for (auto i = order.rbegin(); i != order.rend(); ++i) {
        recvs.push_back(async ? c.irecv(in[*i], from, tags[*i], g) : c.recv(in[*i], from, tags[*i], g));
        if (!async) co_await recvs.back();
      }
      co_await wait_all(recvs);
      sources.assign(tags.size(), -1);
      for (std::size_t k = 0; k < order.size(); ++k) sources[order[order.size() - 1 - k]] = recvs[k].source_rank();
    }
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  for (std::size_t i = 0; i < tags.size() && out.failure.empty() && i < in.size(); ++i)
    for (std::size_t x = 0; x < count_of(i); ++x) {
      const std::int64_t v = in[i].get_int(x);
      if (v == message_value(sender, static_cast<int>(i), x)) continue;
      const auto from = static_cast<std::size_t>((v / 1'000'000) % 1000);
      std::string why = "the receive with tag " + std::to_string(tags[i]) + " holds element " + std::to_string(x) +
                        " = " + std::to_string(v);
      if (v / 1'000'000'000 == sender && from < tags.size() && from != i)
        why += ", from the message sent with tag " + std::to_string(tags[from]) +
               " (tags that differ only in high bits were matched as one)";
      out.failure = with_context(what + ": " + why, context);
      break;
    }
  for (std::size_t i = 0; i < sources.size() && out.failure.empty(); ++i)
    if (sources[i] != sender)
      out.failure = with_context(what + ": the receive with tag " + std::to_string(tags[i]) + " reports source " +
                                     std::to_string(sources[i]) + ", but rank " + std::to_string(sender) + " sent it",
                                 context);
  return out;
}

CaseOutcome run_ring(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named,
                     const std::vector<std::size_t>& counts, bool async, const std::string& context) {
  const std::vector<int> members = sorted(named);
  const int n = static_cast<int>(members.size());
  std::string sizes;
  for (std::size_t k = 0; k < counts.size(); ++k) sizes += (k ? ", " : "") + std::to_string(counts[k]);
  const std::string what = std::string(async ? "isend/irecv" : "send/recv") + " of int64 x " +
                           (counts.size() == 1 ? sizes : "{" + sizes + "} in turn") + " from each member of " +
                           list_of(members) + " (named " + list_of(named) +
                           ") to the next by group rank, around the group";
  constexpr int kTag = 3;
  std::map<std::pair<int, std::size_t>, Tensor> got;  // by receiving member and message
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "ring");
    const int me = c.rank();
    const auto at = std::find(members.begin(), members.end(), me);
    if (at == members.end()) co_return;
    const int p = static_cast<int>(at - members.begin());
    const int next = members[static_cast<std::size_t>((p + 1) % n)];
    const int prev = members[static_cast<std::size_t>((p + n - 1) % n)];
    for (std::size_t k = 0; k < counts.size(); ++k) {
      Tensor out = message(me, static_cast<int>(k), counts[k]);
      Tensor in(DType::kInt64, {static_cast<std::int64_t>(counts[k])});
      if (async) {
        std::vector<Work> w = {c.irecv(in, prev, kTag, g), c.isend(out, next, kTag, g)};
        co_await wait_all(w);
      } else if (p % 2 == 0) {  // even group ranks send first, odd ones receive first: no cycle of waits
        co_await c.send(out, next, kTag, g);
        co_await c.recv(in, prev, kTag, g);
      } else {
        co_await c.recv(in, prev, kTag, g);
        co_await c.send(out, next, kTag, g);
      }
      got.emplace(std::pair{me, k}, std::move(in));
    }
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  for (int p = 0; p < n && out.failure.empty(); ++p) {
    const int me = members[static_cast<std::size_t>(p)];
    const int prev = members[static_cast<std::size_t>((p + n - 1) % n)];
    for (std::size_t k = 0; k < counts.size() && out.failure.empty(); ++k) {
      const auto it = got.find({me, k});
      if (it == got.end()) continue;
      for (std::size_t x = 0; x < counts[k]; ++x) {
        const std::int64_t v = it->second.get_int(x);
        const std::int64_t want = message_value(prev, static_cast<int>(k), x);
        if (v == want) continue;
        std::string why = "rank " + std::to_string(me) + " received element " + std::to_string(x) + " = " +
                          std::to_string(v) + " of the " + std::to_string(counts[k] * 8) + "-byte message from rank " +
                          std::to_string(prev) + ", which sent " + std::to_string(want);
        const std::int64_t from = v / 1'000'000'000;
        if (v >= 0 && from != prev && std::binary_search(members.begin(), members.end(), static_cast<int>(from)))
          why += ": it holds rank " + std::to_string(from) +
                 "'s message (a group rank taken for a global one, or the reverse?)";
        else if (v == 0)
          why += ": nothing arrived there (a message sent to the wrong rank, or bytes lost?)";
        out.failure = with_context(what + ": " + why, context);
        break;
      }
    }
  }
  return out;
}

CaseOutcome run_barrier_after_p2p(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int late,
                                  Nanos late_ns, bool async, const std::string& context) {
  const std::vector<int> members = sorted(named);
  const int n = static_cast<int>(members.size());
  const std::string what = std::string("barrier()") + (async ? " async" : "") + " on " + list_of(members) + " (named " +
                           list_of(named) + ") right after isend/irecv around it, rank " + std::to_string(late) +
                           " entering " + std::to_string(late_ns / 1'000'000) + " ms late";
  std::size_t entered = 0;  // members that have called the barrier (every rank's program runs in this process)
  std::string left_early;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "p2p_then_barrier");
    const int me = c.rank();
    const auto at = std::find(members.begin(), members.end(), me);
    if (at == members.end()) co_return;
    const int p = static_cast<int>(at - members.begin());
    Tensor out = message(me, 0, 4);
    Tensor in(DType::kInt64, {4});
    std::vector<Work> w = {c.irecv(in, members[static_cast<std::size_t>((p + n - 1) % n)], 5, g),
                           c.isend(out, members[static_cast<std::size_t>((p + 1) % n)], 5, g)};
    co_await wait_all(w);
    if (me == late) co_await sleep_for(c.executor(), late_ns);
    ++entered;
    co_await c.barrier(g, CollectiveOptions{Algorithm::kAuto, 0, async});
    if (entered < members.size() && left_early.empty())
      left_early = "rank " + std::to_string(me) + " left the barrier when " + std::to_string(entered) + " of its " +
                   std::to_string(members.size()) + " members had entered: a barrier releases no member before every "
                   "member entered";
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  if (!left_early.empty()) out.failure = with_context(what + ": " + left_early, context);
  return out;
}

CaseOutcome run_group_timeout(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int receiver,
                              Nanos group_timeout_ns, Nanos latest_ns, const std::string& context, bool all_reduce) {
  const std::vector<int> members = sorted(named);
  const int sender = members.front() == receiver ? members.back() : members.front();
  const std::string what =
      (all_reduce ? "all_reduce(int64 x 4) by rank " + std::to_string(receiver) + " alone"
                  : "recv(int64 x 4) by rank " + std::to_string(receiver) + " from rank " + std::to_string(sender) +
                        ", which never sends,") +
      " on " + list_of(members) + " made with the timeout " + ms_text(group_timeout_ns);
  TimedCall r;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, group_timeout_ns, "timed");
    if (c.rank() != receiver) co_return;
    Tensor t(DType::kInt64, {4});
    const Nanos t0 = c.executor().now();
    co_await await_timed(c.executor(), t0, all_reduce ? c.all_reduce(t, ReduceOp::kSum, g) : c.recv(t, sender, 0, g),
                         r);
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  if (!r.failed)
    out.failure = "it completed after " + ms_text(r.elapsed) +
                  (all_reduce ? " though no other member called it" : " though nothing was sent");
  else if (r.elapsed < group_timeout_ns)
    out.failure = "it failed after " + ms_text(r.elapsed) + ", before its group's timeout: " + r.error;
  else if (r.elapsed > latest_ns)
    out.failure = "it failed only after " + ms_text(r.elapsed) + ": its group's timeout was not honoured: " + r.error;
  if (!out.failure.empty()) out.failure = with_context(what + ": " + out.failure, context);
  return out;
}

std::string timed_op_name(TimedOp op) {
  switch (op) {
    case TimedOp::kAllReduce: return "all_reduce";
    case TimedOp::kBarrier: return "barrier";
    case TimedOp::kBroadcast: return "broadcast";
    case TimedOp::kRecvAnySource: return "recv_any_source";
    case TimedOp::kIrecv: return "irecv";
  }
  return "?";
}

CaseOutcome run_call_timeout(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int caller,
                             Nanos group_timeout_ns, Nanos call_timeout_ns, const std::string& context, TimedOp op) {
  // The member the caller's broadcast or irecv waits for (it never calls).
  const int peer = sorted(named).front() == caller ? sorted(named).back() : sorted(named).front();
  std::string call;
  switch (op) {
    case TimedOp::kAllReduce: call = "all_reduce(float32 x 4)"; break;
    case TimedOp::kBarrier: call = "barrier()"; break;
    case TimedOp::kBroadcast: call = "broadcast(float32 x 4, root " + std::to_string(peer) + ")"; break;
    case TimedOp::kRecvAnySource: call = "recv(float32 x 4) from any source, none sending,"; break;
    case TimedOp::kIrecv: call = "irecv(float32 x 4) from rank " + std::to_string(peer) + ", which never sends,"; break;
  }
  const std::string what = call + " by rank " + std::to_string(caller) + " on " + list_of(sorted(named)) +
                           " (group timeout " + ms_text(group_timeout_ns) + ") with its own timeout " + ms_text(call_timeout_ns);
  TimedCall r;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, group_timeout_ns, "timed");
    if (c.rank() != caller) co_return;
    Tensor t(DType::kFloat32, {4});
    const Nanos t0 = c.executor().now();
    const CollectiveOptions own{Algorithm::kAuto, call_timeout_ns, false};
    Work w;
    switch (op) {
      case TimedOp::kAllReduce: w = c.all_reduce(t, ReduceOp::kSum, g, own); break;
      case TimedOp::kBarrier: w = c.barrier(g, own); break;
      case TimedOp::kBroadcast: w = c.broadcast(t, peer, g, own); break;
      case TimedOp::kRecvAnySource: w = c.recv(t, kAnySource, 3, g, call_timeout_ns); break;
      case TimedOp::kIrecv: w = c.irecv(t, peer, 3, g, call_timeout_ns); break;
    }
    co_await await_timed(c.executor(), t0, std::move(w), r);
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  const Nanos latest = call_timeout_ns + (group_timeout_ns - call_timeout_ns) / 2;
  if (!r.failed)
    out.failure = "it completed after " + ms_text(r.elapsed) + " though no other member called it or sent";
  else if (r.elapsed < call_timeout_ns)
    out.failure = "it failed after " + ms_text(r.elapsed) + ", before its own deadline: " + r.error;
  else if (r.elapsed > latest)
    out.failure = "it failed only after " + ms_text(r.elapsed) +
                  (r.elapsed >= group_timeout_ns ? ", at the group's timeout: its own was not honoured"
                                                 : ", long after its own deadline") +
                  ": " + r.error;
  if (!out.failure.empty()) out.failure = with_context(what + ": " + out.failure, context);
  return out;
}

}  // namespace collie::conformance
