#include "script/script_rank.h"

#include <algorithm>
#include <coroutine>

#include "backends/remote/call_codec.h"
#include "core/error.h"
#include "core/op.h"

namespace collie::script {

namespace {

using json = nlohmann::json;

// A rank that polls an unfinished op with is_completed() lets the clock
// run: the second poll in a row waits kPollQuantumNs first, each next one
// twice as long up to kMaxPollWaitNs, and past kMaxPolls a poll waits for
// the op (a spinning rank is a blocked one: a deadlock, if nothing else can
// move). On a process backend an async op's completion is seen only by
// waiting for it (backends/remote/op_protocol.h), so there the second poll
// waits.
constexpr Nanos kPollQuantumNs = 1000;
constexpr Nanos kMaxPollWaitNs = 1'000'000;
constexpr int kMaxPolls = 40;

// Lets every coroutine that is ready at this instant run first: the other
// ranks a collective completed for get their answers before this rank
// blocks for its next request, so their processes compute in parallel
// (the executor's order does not depend on which request arrives first).
struct YieldNow {
  Executor& executor;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { executor.schedule(h); }
  void await_resume() const noexcept {}
};

std::string error_kind_of(const std::exception_ptr& e, std::string* text) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    *text = x.what();
    return std::string(error_kind_name(x.kind()));
  } catch (const std::exception& x) {
    *text = x.what();
    return "library";
  } catch (...) {
    *text = "an unknown error";
    return "library";
  }
}

// A request id a binary answer can echo (script_protocol.h): a
// non-negative integer.
std::optional<std::uint64_t> binary_id(const json& id) {
  if (id.is_number_unsigned() || (id.is_number_integer() && id.get<std::int64_t>() >= 0)) return id.get<std::uint64_t>();
  return std::nullopt;
}

// Answers `type` for op `op` (no outputs): in binary when the id allows it.
void answer_plain(Hub& hub, int rank, BinaryAnswer::Type type, const json& id, std::uint64_t op) {
  if (const auto bid = binary_id(id)) {
    hub.answer(rank, BinaryAnswer{type, -1, *bid, op});
    return;
  }
  const char* t = type == BinaryAnswer::Type::kDone ? "done" : type == BinaryAnswer::Type::kIssued ? "issued" : "pending";
  json head{{"t", t}, {"id", id}, {"op", op}};
  if (type == BinaryAnswer::Type::kDone) head["outputs"] = json::array();
  hub.answer(rank, head);
}

// The codes binary requests use (script_protocol.h), sent with "ready".
const json& request_codes() {
  static const json codes = [] {
    json ops = json::array(), dtypes = json::array(), reduce_ops = json::array();
    for (const OpSpec& s : op_table()) ops.push_back(std::string(s.name));
    for (int k = 0; k < kNumDTypes; ++k) dtypes.push_back(std::string(dtype_name(static_cast<DType>(k))));
    for (int k = 0; k < kNumReduceOps; ++k) reduce_ops.push_back(std::string(reduce_op_name(static_cast<ReduceOp>(k))));
    return json{{"ops", std::move(ops)}, {"dtypes", std::move(dtypes)}, {"reduce_ops", std::move(reduce_ops)}};
  }();
  return codes;
}

}  // namespace

Where make_where(json where) {
  if (!where.is_array() || where.empty()) return nullptr;
  auto s = std::make_shared<Site>();
  s->text = where_text(where);
  s->where = std::move(where);
  return s;
}

std::string call_text(const DistCall& c, int rank) {
  const OpSpec& spec = c.spec();
  std::string args;
  auto add = [&](const std::string& a) { args += (args.empty() ? "" : ", ") + a; };
  if (!spec.peer_key.empty()) {
    if (spec.any_source && c.peer == kAnySource) add(std::string(spec.peer_key) + "=any");
    else add(std::string(spec.peer_key) + "=" + std::to_string(c.peer));
  }
  if (spec.tag && c.tag != 0) add("tag=" + std::to_string(c.tag));
  if (spec.reduce_op) add(std::string(reduce_op_name(c.reduce_op)));
  const bool is_root = spec.rooted && c.peer == rank;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const std::vector<TensorView> v = c.views(slot);
    if (v.empty() || !spec.operand(slot).passed_by(is_root)) continue;
    add(std::string(dtype_name(v[0].dtype)) + " x " + std::to_string(v[0].count) +
        (v.size() > 1 ? " (list of " + std::to_string(v.size()) + ")" : ""));
    break;
  }
  if (spec.family == OpFamily::kBatch) add(std::to_string(c.p2p.size()) + " ops");
  const std::string group = c.group.is_world_default() ? "world" : c.group.name();
  return std::string(c.name()) + "(" + args + ") on " + group;
}

struct ScriptRank::Pending {
  Work work;
  remote::DecodedCall call;           // owns the buffers the op reads and writes
  std::vector<std::size_t> writes;    // buffers this rank's call writes
  std::function<void(const Work&)> recorded;
  std::string text;
  Where where;
  int polls = 0;
};

ScriptRank::ScriptRank(int rank, int world, RankContext context)
    : rank_(rank), world_(world), ctx_(std::move(context)) {}

ScriptRank::~ScriptRank() = default;

void ScriptRank::stamp() {
  if (dist_) ctx_.output->set_stamp(rank_, dist_->executor().now());
}

void ScriptRank::check_crash(std::uint64_t op_count) {
  if (view_.killed_by_fault) return;
  for (const ProcessFault& f : ctx_.process_crashes) {
    if (f.kind != ProcessFault::Kind::kCrash || f.rank != rank_ || f.before_op != op_count) continue;
    ctx_.hub->kill_rank(rank_);
    view_.killed_by_fault = true;
    view_.ended = "killed (SIGKILL) by the injected fault " + f.text + " before its op #" + std::to_string(op_count);
    return;
  }
  if (!ctx_.watch_crashes || !ctx_.job) return;
  for (const InjectedFault& f : ctx_.job->injected_faults()) {
    if (f.kind != InjectedFault::Kind::kCrash || f.src != rank_) continue;
    ctx_.hub->kill_rank(rank_);
    view_.killed_by_fault = true;
    view_.ended = "killed (SIGKILL): the backend crashed rank " + std::to_string(rank_) + " (" + f.text + ")";
    return;
  }
}

Task<void> ScriptRank::serve(Dist& dist) {
  dist_ = &dist;
  if (ctx_.records) recorder_ = std::make_unique<check::CallRecorder>(*ctx_.records, rank_, world_);
  groups_.push_back(Group());
  ctx_.output->set_clock([&dist] { return dist.executor().now(); });

  Incoming first = ctx_.hub->next(rank_);
  if (first.kind != Incoming::Kind::kRequest) {
    view_.state = RankView::State::kEnded;
    view_.ended = first.why;
    ctx_.output->set_done(rank_);
    if (first.kind == Incoming::Kind::kAborted) throw Error(ErrorKind::kUsage, OpContext{rank_, "", "", -1, {}}, first.why);
    throw Error(ErrorKind::kTransport, OpContext{rank_, "init_process_group", "", -1, {}},
                "rank " + std::to_string(rank_) + ": " + first.why);
  }
  view_.state = RankView::State::kComputing;
  view_.init_where = make_where(first.message.head.value("where", json::array()));
  sites_.push_back(nullptr);
  stamp();
  ctx_.hub->answer(rank_, json{{"t", "ready"}, {"id", first.message.head.value("id", json())}, {"group", 0},
                               {"codes", request_codes()}});

  for (;;) {
    co_await YieldNow{dist.executor()};
    Incoming in = ctx_.hub->next(rank_);
    switch (in.kind) {
      case Incoming::Kind::kRequest:
        co_await handle(in.message);
        continue;
      case Incoming::Kind::kEnded:
        if (view_.ended.empty()) view_.ended = in.why;
        co_await finish();
        co_return;
      case Incoming::Kind::kSilent:
        view_.state = RankView::State::kEnded;
        view_.ended = "stuck outside collie: " + in.why;
        ctx_.output->set_done(rank_);
        throw Error(ErrorKind::kTimeout, OpContext{rank_, view_.last_call, "", -1, {}}, in.why);
      case Incoming::Kind::kAborted:
        view_.state = RankView::State::kEnded;
        if (view_.ended.empty()) view_.ended = "the run was given up";
        ctx_.output->set_done(rank_);
        throw Error(ErrorKind::kUsage, OpContext{rank_, "", "", -1, {}}, in.why);
    }
  }
}

Task<void> ScriptRank::handle(const remote::Message& m) {
  if (m.head.is_null()) {
    co_await handle_binary(m);
    co_return;
  }
  const std::string t = m.head.value("t", "");
  const json id = m.head.value("id", json());
  if (t == "op") {
    co_await on_op(m);
  } else if (t == "wait") {
    co_await on_wait(m.head.value("op", std::uint64_t{0}), make_where(m.head.value("where", json::array())), id);
  } else if (t == "test") {
    co_await on_test(m.head.value("op", std::uint64_t{0}), id);
  } else if (t == "group") {
    const std::vector<int> ranks = m.head.value("ranks", std::vector<int>{});
    const Nanos timeout = m.head.value("timeout_ns", Nanos{0});
    try {
      groups_.push_back(dist_->new_group(ranks, timeout, ""));
      if (ctx_.keep_calls) kept_.push_back(KeptCall{KeptCall::Kind::kGroup, ranks, static_cast<int>(groups_.size() - 1), {}, 0, false});
      ctx_.hub->answer(rank_, json{{"t", "group_made"}, {"id", id}, {"group", groups_.size() - 1}});
    } catch (const std::exception& e) {
      if (!first_error_) first_error_ = std::current_exception();
      ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id}, {"error", std::string("collie: ") + e.what()}});
    }
  } else if (t == "ungroup") {
    // destroy_process_group(group): refused for the world and for a group
    // this rank never made or destroyed already (the answer says why).
    const auto g = m.head.value("group", std::size_t{0});
    try {
      if (g == 0 || g >= groups_.size())
        throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "destroy_group", "", -1, {}},
                    "group " + std::to_string(g) + " is not a group this rank made with new_group");
      dist_->destroy_group(groups_[g]);
      if (ctx_.keep_calls) kept_.push_back(KeptCall{KeptCall::Kind::kDestroyGroup, {}, static_cast<int>(g), {}, 0, false});
      ctx_.hub->answer(rank_, json{{"t", "ungrouped"}, {"id", id}});
    } catch (const std::exception& e) {
      if (!first_error_) first_error_ = std::current_exception();
      ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id}, {"error", std::string("collie: ") + e.what()}});
    }
  } else if (t == "exception") {
    exception_ = m.head;
    view_.traceback = m.head.value("traceback", std::string());
    view_.exception_type = m.head.value("type", std::string());
    view_.exception_message = m.head.value("message", std::string());
  } else if (t == "exit") {
    // How it ended is said once its connection closes.
  } else if (t == "init") {
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id},
                                 {"error", "collie: init_process_group was called twice on rank " + std::to_string(rank_)}});
  } else if (!id.is_null()) {
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id}, {"error", "collie: an unknown request '" + t + "'"}});
  }
}

Task<void> ScriptRank::handle_binary(const remote::Message& m) {
  std::optional<std::uint64_t> id;
  BinaryRequest r;
  std::unique_ptr<Pending> p;
  std::uint32_t gid = 0;
  try {
    if (m.blobs.size() != 2) throw std::runtime_error("a binary message that is not a header and a payload");
    r = read_binary_request(m.blobs[0], &id);
    if (!r.site_json.empty()) {
      json where = json::parse(r.site_json, nullptr, false);
      if (!where.is_array()) throw std::runtime_error("call site " + std::to_string(r.site) + " that is not a JSON list");
      if (r.site > sites_.size())
        throw std::runtime_error("call site " + std::to_string(r.site) + " defined before site " +
                                 std::to_string(sites_.size()));
      if (r.site == sites_.size()) sites_.push_back(nullptr);
      sites_[r.site] = make_where(std::move(where));
    } else if (r.site >= sites_.size()) {
      throw std::runtime_error("call site " + std::to_string(r.site) + ", which it never defined");
    }
    if (r.type == BinaryRequest::Type::kOp) {
      p = std::make_unique<Pending>();
      p->call = decode_binary_op(m.blobs[0], m.blobs[1], &gid);
    } else if (!m.blobs[1].empty()) throw std::runtime_error("a wait or test request with a payload");
  } catch (const std::exception& e) {
    const std::string why = "rank " + std::to_string(rank_) + " sent a request collie cannot read: " + e.what();
    if (id) {
      ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", *id}, {"at_issue", true}, {"error", "collie: " + why}});
    } else {
      ctx_.hub->abort(why);  // nothing to answer: the process would wait forever
    }
    co_return;
  }
  const json request_id = *id;
  switch (r.type) {
    case BinaryRequest::Type::kOp:
      p->where = sites_[r.site];
      co_await start_op(std::move(p), gid, request_id, nullptr);
      break;
    case BinaryRequest::Type::kWait:
      co_await on_wait(r.op, sites_[r.site], request_id, r.timeout_ns);
      break;
    case BinaryRequest::Type::kTest:
      co_await on_test(r.op, request_id);
      break;
  }
}

Task<void> ScriptRank::on_wait(std::uint64_t op, Where where, const json& id, Nanos timeout_ns) {
  if (ctx_.keep_calls) kept_.push_back(KeptCall{KeptCall::Kind::kWait, {}, 0, {}, op, false});
  if (pending_.count(op)) {
    view_.in_call_where = std::move(where);
    co_await settle(op, id, timeout_ns);
  } else {
    // Already answered (a second wait, or a blocking op's): nothing to do.
    answer_plain(*ctx_.hub, rank_, BinaryAnswer::Type::kDone, id, op);
  }
}

Task<void> ScriptRank::on_op(const remote::Message& m) {
  const json id = m.head.value("id", json());
  auto p = std::make_unique<Pending>();
  try {
    p->call = remote::decode_call(m.head, m.blobs);
  } catch (const std::exception& e) {
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id}, {"at_issue", true},
                                 {"error", std::string("collie: a call collie cannot read: ") + e.what()}});
    co_return;
  }
  p->where = make_where(m.head.value("where", json::array()));
  co_await start_op(std::move(p), m.head.value("group", std::size_t{0}), id, &m);
}

Task<void> ScriptRank::start_op(std::unique_ptr<Pending> p, std::size_t gid, const json& id,
                                const remote::Message* request) {
  auto refuse = [&](const std::string& why) {
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", id}, {"at_issue", true}, {"error", "collie: " + why}});
  };
  if (gid >= groups_.size()) {
    refuse("an op on group " + std::to_string(gid) + ", which this rank never created");
    co_return;
  }
  DistCall& c = p->call.call;
  c.group = gid == 0 ? Group() : groups_[gid];
  const std::string group = c.group.is_world_default() ? "world" : c.group.name();
  p->writes = remote::written_buffers(c, rank_);
  p->text = call_text(c, rank_);
  const std::uint64_t op = ++ops_;
  if (ctx_.keep_calls) {
    KeptCall k{KeptCall::Kind::kOp, {}, static_cast<int>(gid), {}, op, c.async};
    if (request) {
      k.request = *request;
    } else {  // the inputs as issued, before the op writes them
      remote::EncodedCall e = remote::encode_call(c, rank_);
      k.request.head = std::move(e.head);
      if (p->where) k.request.head["where"] = p->where->where;
      for (const TensorView& v : e.buffers) k.request.blobs.emplace_back(v.byte_data(), v.byte_data() + v.bytes());
    }
    kept_.push_back(std::move(k));
  }
  view_.last_call = p->text;
  view_.last_call_where = p->where;
  check_crash(op);  // process backends: before the op
  if (recorder_) p->recorded = recorder_->before(c, group, p->where ? p->where->text : std::string());
  try {
    p->work = dispatch(*dist_, c);
  } catch (const std::exception& e) {
    if (!first_error_) first_error_ = std::current_exception();
    refuse(e.what());
    co_return;
  }
  if (c.kind == OpKind::kSend) sent_.push_back(SentMessage{c.peer, c.tag, group, p->text, p->where});
  for (const P2POp& b : c.p2p)
    if (b.is_send) sent_.push_back(SentMessage{b.peer, b.tag, group, p->text, p->where});
  check_crash(op);  // in-process backends: the op may have crashed it
  const bool async = c.async;
  pending_[op] = std::move(p);
  if (async) {
    answer_plain(*ctx_.hub, rank_, BinaryAnswer::Type::kIssued, id, op);
    co_return;
  }
  view_.in_call_where = view_.last_call_where;
  co_await settle(op, id);
}

Task<void> ScriptRank::settle(std::uint64_t op, const json& request_id, Nanos timeout_ns) {
  Pending& p = *pending_.at(op);
  view_.state = RankView::State::kInCollie;
  view_.in_call = p.text;
  ctx_.output->set_blocked(rank_, true);
  std::exception_ptr error;
  bool ended = true;
  if (timeout_ns > 0 && !ctx_.polls_see_completion) {
    // The op runs in the rank's worker process, which waits for it once
    // told to: it would serve nothing else until the op ends (await_until).
    if (notes_.empty())
      notes_.push_back("rank " + std::to_string(rank_) + ": Work.wait(timeout) of " + p.text + " at " +
                       (view_.in_call_where ? view_.in_call_where->text : std::string("its call")) + " waited without its timeout: on a process backend the op is "
                       "waited for in the rank's worker process (run on an in-process backend, e.g. --backend sim, "
                       "to have it time out)");
  } else if (timeout_ns > 0) {
    ended = co_await await_until(p.work, dist_->executor().now() + timeout_ns, wait_timers_);
  }
  if (ended) {
    try {
      co_await p.work;
    } catch (...) {
      error = std::current_exception();
    }
  }
  ctx_.output->set_blocked(rank_, false);
  view_.state = RankView::State::kComputing;
  view_.in_call.clear();
  stamp();
  if (!ended) {
    // torch: Work.wait(timeout) raises and the op keeps running; the
    // program decides what follows (an uncaught error ends it).
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", request_id}, {"op", op}, {"kind", "timeout"},
                                 {"keeps_running", true},
                                 {"error", "rank " + std::to_string(rank_) + ": " + p.text + " did not complete within " +
                                               std::to_string(timeout_ns / 1'000'000) + " ms (Work.wait(timeout)); the op keeps running"}});
    co_return;
  }
  answer_outcome(op, p, request_id, error);
  pending_.erase(op);
}

void ScriptRank::answer_outcome(std::uint64_t op, Pending& p, const json& request_id, std::exception_ptr error) {
  if (error) {
    if (!first_error_) first_error_ = error;
    std::string text;
    const std::string kind = error_kind_of(error, &text);
    ctx_.hub->answer(rank_, json{{"t", "failed"}, {"id", request_id}, {"op", op}, {"kind", kind}, {"error", text}});
    return;
  }
  if (p.recorded) p.recorded(p.work);
  std::vector<std::span<const std::byte>> blobs;
  for (std::size_t k : p.writes) {
    const Tensor& t = p.call.tensors[k];
    blobs.emplace_back(static_cast<const std::byte*>(t.data()), t.bytes());
  }
  if (const auto bid = binary_id(request_id)) {
    ctx_.hub->answer(rank_, BinaryAnswer{BinaryAnswer::Type::kDone, p.work.source_rank(), *bid, op}, p.writes, blobs);
    return;
  }
  json outputs(p.writes);
  json head{{"t", "done"}, {"id", request_id}, {"op", op}, {"outputs", std::move(outputs)}};
  if (p.work.source_rank() >= 0) head["source"] = p.work.source_rank();
  ctx_.hub->answer(rank_, head, blobs);
}

Task<void> ScriptRank::on_test(std::uint64_t op, const json& id) {
  auto it = pending_.find(op);
  if (it == pending_.end()) {
    answer_plain(*ctx_.hub, rank_, BinaryAnswer::Type::kDone, id, op);
    co_return;
  }
  Pending& p = *it->second;
  if (!p.work.is_completed() && p.polls >= (ctx_.polls_see_completion ? kMaxPolls : 1)) {
    co_await settle(op, id);
    co_return;
  }
  if (!p.work.is_completed() && p.polls > 0) {
    ctx_.output->set_blocked(rank_, true);
    const Nanos wait = std::min(kMaxPollWaitNs, kPollQuantumNs << std::min(p.polls - 1, 20));
    co_await SleepUntil{dist_->executor(), dist_->executor().now() + wait};
    ctx_.output->set_blocked(rank_, false);
    stamp();
  }
  ++p.polls;
  if (p.work.is_completed()) {
    co_await settle(op, id);  // completed: answers at once
    co_return;
  }
  answer_plain(*ctx_.hub, rank_, BinaryAnswer::Type::kPending, id, op);
}

Task<void> ScriptRank::finish() {
  // Ops the program started and never waited for still run to their end,
  // as a scenario's unfinished handles do.
  for (const auto& [op, p] : pending_) view_.unfinished.emplace_back(p->text, p->where);
  view_.state = RankView::State::kInCollie;
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    Pending* p = it->second.get();
    view_.in_call = p->text + " (started, never waited for, before the process ended)";
    view_.in_call_where = p->where;
    ctx_.output->set_blocked(rank_, true);
    std::exception_ptr error;
    try {
      co_await p->work;
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      if (!first_error_) first_error_ = error;
    } else if (p->recorded) {
      p->recorded(p->work);
    }
  }
  pending_.clear();
  view_.state = RankView::State::kEnded;
  view_.in_call.clear();
  ctx_.output->set_done(rank_);
  if (first_error_) std::rethrow_exception(first_error_);
  if (!exception_.is_null()) {
    const std::string where = where_text(exception_.value("where", json::array()));
    throw LibraryError("rank " + std::to_string(rank_) + " raised " + exception_.value("type", std::string("an exception")) +
                       (exception_.value("message", std::string()).empty() ? "" : ": " + exception_.value("message", std::string())) +
                       (where.empty() ? "" : " at " + where));
  }
  if (view_.ended.find("exited with code 0") == std::string::npos)
    throw LibraryError("rank " + std::to_string(rank_) + "'s process " + view_.ended);
}

}  // namespace collie::script
