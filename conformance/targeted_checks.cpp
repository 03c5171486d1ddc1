#include "conformance/targeted_checks.h"

#include <algorithm>
#include <cstdint>
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

// Element x of message i from `sender`: who sent it and which it is can be
// read back from any element.
std::int64_t message_value(int sender, int i, std::size_t x) {
  return std::int64_t{sender} * 1'000'000'000 + std::int64_t{i} * 1'000'000 + static_cast<std::int64_t>(x % 1'000'000);
}

Tensor message(int sender, int i, std::size_t count) {
  Tensor t(DType::kInt64, {static_cast<std::int64_t>(count)});
  for (std::size_t x = 0; x < count; ++x) t.set_int(x, message_value(sender, i, x));
  return t;
}

}  // namespace

CaseOutcome run_any_source(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int receiver,
                           int per_sender, std::size_t count, bool async, const std::string& context) {
  const std::vector<int> members = sorted(named);
  const int senders = static_cast<int>(members.size()) - 1;
  const std::string what = std::string(async ? "irecv" : "recv") + " from any source by rank " +
                           std::to_string(receiver) + " on " + list_of(members) + " (named " + list_of(named) + "), " +
                           std::to_string(per_sender) + " messages of int64 x " + std::to_string(count) +
                           " from each other member";
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
        out.push_back(message(me, i, count));
        sends.push_back(c.isend(out.back(), receiver, kTag, g));
      }
      co_await wait_all(sends);
      co_return;
    }
    const auto total = static_cast<std::size_t>(per_sender * senders);
    std::vector<Tensor> in;
    in.reserve(total);
    for (std::size_t k = 0; k < total; ++k) in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(count)});
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
    const std::int64_t first = count ? r.data.get_int(0) : 0;
    const int sender = static_cast<int>(first / 1'000'000'000);
    const int index = static_cast<int>((first / 1'000'000) % 1000);
    const std::string receive = "receive " + std::to_string(k);
    if (!std::binary_search(members.begin(), members.end(), sender) || sender == receiver) {
      fail(receive + " holds element 0 = " + std::to_string(first) + ", which no member sent");
      break;
    }
    if (r.source != sender) {
      std::string why = receive + " reports source " + std::to_string(r.source) + ", but it holds rank " +
                        std::to_string(sender) + "'s message " + std::to_string(index);
      if (r.source == group_rank(members, sender))
        why += ": the source is the sender's group rank; torch reports the global rank (dist.recv returns "
               "it; rank " + std::to_string(sender) + " is group rank " + std::to_string(r.source) + ")";
      fail(why);
      break;
    }
    for (std::size_t x = 0; x < count; ++x)
      if (r.data.get_int(x) != message_value(sender, index, x)) {
        fail(receive + " (rank " + std::to_string(sender) + "'s message " + std::to_string(index) + ") element " +
             std::to_string(x) + " is " + std::to_string(r.data.get_int(x)) + ", it was sent as " +
             std::to_string(message_value(sender, index, x)));
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

std::vector<int> tag_range() {
  return {0, 1, 1 + (1 << 16), 1 + (1 << 24), 1 + (1 << 30), (1 << 30) - 1, 0x7fffffff};
}

CaseOutcome run_tag_range(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int sender, int receiver,
                          bool async, const std::string& context) {
  const std::vector<int> tags = tag_range();
  auto count_of = [](std::size_t i) { return i == 0 ? std::size_t{65537} : std::size_t{3}; };
  std::string what = std::string(async ? "irecv" : "recv") + " by rank " + std::to_string(receiver) + " from rank " +
                     std::to_string(sender) + " on " + list_of(sorted(named)) + " with tags";
  for (int t : tags) what += " " + std::to_string(t);
  what += ", in the reverse order of their isends";
  std::vector<Tensor> in;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, 0, "tags");
    const int me = c.rank();
    if (me == sender) {
      std::vector<Tensor> out;
      out.reserve(tags.size());
      std::vector<Work> sends;
      for (std::size_t i = 0; i < tags.size(); ++i) {
        out.push_back(message(me, static_cast<int>(i), count_of(i)));
        sends.push_back(c.isend(out.back(), receiver, tags[i], g));
      }
      co_await wait_all(sends);
    } else if (me == receiver) {
      in.clear();
      for (std::size_t i = 0; i < tags.size(); ++i)
        in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(count_of(i))});
      std::vector<Work> recvs;
      for (std::size_t i = tags.size(); i-- > 0;) {
        recvs.push_back(async ? c.irecv(in[i], sender, tags[i], g) : c.recv(in[i], sender, tags[i], g));
        if (!async) co_await recvs.back();
      }
      co_await wait_all(recvs);
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
  return out;
}

CaseOutcome run_call_timeout(const RunOnEveryRank& run, int /*world*/, const std::vector<int>& named, int caller,
                             Nanos group_timeout_ns, Nanos call_timeout_ns, const std::string& context) {
  auto ms = [](Nanos ns) { return std::to_string(ns / 1'000'000) + " ms"; };
  const std::string what = "all_reduce(float32 x 4) by rank " + std::to_string(caller) + " alone on " +
                           list_of(sorted(named)) + " (group timeout " + ms(group_timeout_ns) + ") with its own timeout " +
                           ms(call_timeout_ns);
  bool failed = false;
  std::string error;
  Nanos elapsed = -1;
  auto program = [&](Dist& c) -> Task<void> {
    const Group g = c.new_group(named, group_timeout_ns, "timed");
    if (c.rank() != caller) co_return;
    Tensor t(DType::kFloat32, {4});
    const Nanos t0 = c.executor().now();
    try {
      co_await c.all_reduce(t, ReduceOp::kSum, g, CollectiveOptions{Algorithm::kAuto, call_timeout_ns, false});
    } catch (const std::exception& e) {
      failed = true;
      error = e.what();
    }
    elapsed = c.executor().now() - t0;
  };
  const RunResult res = run(program);
  if (!res.ok()) return failed_run(res, with_context(what, context));
  CaseOutcome out;
  const Nanos latest = call_timeout_ns + (group_timeout_ns - call_timeout_ns) / 2;
  if (!failed)
    out.failure = "it completed after " + ms(elapsed) + " though no other member called it";
  else if (elapsed < call_timeout_ns)
    out.failure = "it failed after " + ms(elapsed) + ", before its own deadline: " + error;
  else if (elapsed > latest)
    out.failure = "it failed only after " + ms(elapsed) +
                  (elapsed >= group_timeout_ns ? ", at the group's timeout: its own was not honoured"
                                               : ", long after its own deadline") +
                  ": " + error;
  if (!out.failure.empty()) out.failure = with_context(what + ": " + out.failure, context);
  return out;
}

}  // namespace collie::conformance
