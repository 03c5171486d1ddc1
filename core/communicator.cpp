#include "core/communicator.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "core/algorithms/algorithms.h"
#include "core/error.h"
#include "core/send_scribble.h"
#include "core/transport_call.h"

namespace collie {

namespace {

std::string describe_tensor(const TensorView& t) {
  return std::string(dtype_name(t.dtype)) + " x " + std::to_string(t.count);
}

// Group rank of `global` in g, -1 if it is not a member.
int index_in(const GroupState& g, int global) {
  auto it = std::lower_bound(g.ranks().begin(), g.ranks().end(), global);
  return (it != g.ranks().end() && *it == global) ? static_cast<int>(it - g.ranks().begin()) : -1;
}

}  // namespace

struct Communicator::CollectiveCall {
  std::string name;
  GroupState* group = nullptr;
  Fingerprint fp;
  Nanos timeout_ns = 0;
  bool wait_all_ranks = false;  // monitored_barrier
};

namespace {

struct WakeAt {
  Transport* t;
  Nanos when;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    TransportCall call("schedule_at()");
    t->schedule_at(when, h);
  }
  void await_resume() const {
    if (TransportCall::current()) [[unlikely]] note_resumed_inside_call(t, "an op timeout's timer");
    restore_scribbles(t);
  }
};

std::string duration_text(Nanos ns) {
  std::ostringstream os;
  if (ns % 1000000 == 0) os << ns / 1000000 << " ms";
  else if (ns % 1000 == 0) os << ns / 1000 << " us";
  else os << ns << " ns";
  return os.str();
}

// Fails the op of `d`, naming what it still waits for.
void fire_timeout(MessageEngine& engine, const std::shared_ptr<WorkState>& w, const OpInfo& info, Nanos timeout,
                  bool collective, std::uint32_t context) {
  std::vector<int> peers;
  const auto waits = collective ? engine.describe_waits(context, static_cast<std::uint64_t>(info.seq), &peers)
                                : engine.describe_waits(w, &peers);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  if (collective && info.fp.op == CollectiveKind::kMonitoredBarrier && info.step_phase &&
      std::string_view(info.step_phase) == algorithms::kMonitorWaitsPhase && !peers.empty()) {
    // torch's monitored_barrier names the first member that did not
    // arrive, or every one with wait_all_ranks.
    if (!info.wait_all_ranks) peers.resize(1);
    std::string ranks;
    for (std::size_t i = 0; i < peers.size(); ++i) ranks += (i ? ", " : "") + std::to_string(peers[i]);
    auto err = std::make_exception_ptr(
        Error(ErrorKind::kTimeout, info.context(peers),
              (peers.size() == 1 ? "rank " : "ranks ") + ranks + " did" +
                  " not arrive within " + duration_text(timeout)));
    engine.abort_collective(context, static_cast<std::uint64_t>(info.seq), err);
    return;
  }
  std::string detail = "did not complete within " + duration_text(timeout);
  if (info.step_phase) detail += " (at algorithm step '" + info.step() + "')";
  if (waits.empty()) {
    detail += "; nothing of it is in flight (its peers never sent or never called it)";
  } else {
    detail += "; still waiting for ";
    for (std::size_t i = 0; i < waits.size(); ++i) detail += (i ? ", " : "") + waits[i];
  }
  auto err = std::make_exception_ptr(Error(ErrorKind::kTimeout, info.context(peers), detail));
  if (collective) engine.abort_collective(context, static_cast<std::uint64_t>(info.seq), err);
  else engine.abort_p2p(w, err);
}

}  // namespace

std::shared_ptr<OpInfo> Communicator::new_op(const std::string& op, const GroupState& g, std::int64_t seq) {
  auto info = std::allocate_shared<OpInfo>(PoolAllocator<OpInfo>{});
  info->rank = rank_;
  info->op = op;
  info->group = g.name;
  info->seq = seq;
  info->started_at = t_.now();
  info->id = ++ops_issued_;
  if (info->started_at < last_now_)
    engine_.report_contract_violation("the clock went back from t=" + std::to_string(last_now_) + " ns to t=" +
                                      std::to_string(info->started_at) + " ns (core/executor.h: now() never goes back)");
  last_now_ = std::max(last_now_, info->started_at);
  return info;
}

namespace {
std::string error_text(const WorkState& w) {
  if (!w.error) return {};
  try {
    std::rethrow_exception(w.error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "error";
  }
}
}  // namespace

void Communicator::announce(const OpInfo& info) {
  if (OpObserver* obs = opts_->observer) obs->op_begin(rank_, info.id, info, t_.now());
}

void Communicator::watch(const std::shared_ptr<OpInfo>& info, const std::shared_ptr<WorkState>& w,
                         const GroupState& g, Nanos timeout_override, bool collective) {
  if (OpObserver* obs = opts_->observer; obs && obs->wants_op_end()) {
    if (w->completed) {  // at once (an eager send, a receive whose message was there)
      obs->op_end(rank_, info->id, error_text(*w), t_.now());
      return;
    }
    WorkState* raw = w.get();
    Transport* t = &t_;
    const int rank = rank_;
    const std::uint64_t id = info->id;
    w->more().on_finish = [obs, raw, t, rank, id] { obs->op_end(rank, id, error_text(*raw), t->now()); };
  }
  if (w->completed) return;
  const Nanos timeout = timeout_override > 0 ? timeout_override
                        : g.timeout_ns > 0   ? g.timeout_ns
                                             : opts_->default_timeout_ns;
  if (timeout <= 0) return;
  if (!timeouts_) timeouts_ = std::make_unique<Timeouts>();
  DeadlineLane* lane = nullptr;
  for (auto& l : timeouts_->lanes)
    if (l.timeout == timeout) lane = &l;
  if (!lane) lane = &timeouts_->lanes.emplace_back(DeadlineLane{timeout, {}});
  Nanos when = t_.now() + timeout;
  if (!lane->entries.empty()) when = std::max(when, lane->entries.back().when);  // keeps the lane sorted
  lane->entries.push_back(Deadline{when, w, info, collective, g.coll_context});
  if (++timeouts_->count > 2 * timeouts_->after_sweep + 64) {
    timeouts_->count = 0;
    for (auto& l : timeouts_->lanes) {
      std::erase_if(l.entries, [](const Deadline& d) {
        auto live = d.work.lock();
        return !live || live->completed;
      });
      timeouts_->count += l.entries.size();
    }
    timeouts_->after_sweep = timeouts_->count;
  }
  arm(when);
}

Spawned watchdog(Communicator& c, Nanos when) {
  ++c.timeouts_->timers_pending;
  co_await WakeAt{&c.t_, when};
  --c.timeouts_->timers_pending;
  if (c.timeouts_->armed == when) c.timeouts_->armed.reset();
  if (const Nanos now = c.t_.now(); now < when) {
    // A clock that has not moved since the rank started is the likelier
    // fault than a timer fired early: say which.
    const std::string still = now == c.created_at_ && now == c.last_now_
                                  ? "; the clock stands still: now() has read t=" + std::to_string(now) +
                                        " ns since this rank started"
                                  : std::string();
    c.engine_.report_contract_violation("a timer for t=" + std::to_string(when) + " ns fired at t=" +
                                        std::to_string(now) + " ns (core/executor.h: schedule_at resumes once "
                                        "now() reads at least its time, never earlier" + still + ")");
    co_return;
  }
  c.expire_deadlines();
}

void Communicator::arm(Nanos when) {
  if (timeouts_->armed && *timeouts_->armed <= when) return;
  timeouts_->armed = when;
  ops_.spawn(watchdog(*this, when));
}

void Communicator::expire_deadlines() {
  const Nanos now = t_.now();
  std::optional<Nanos> next;
  for (std::size_t i = 0; i < timeouts_->lanes.size(); ++i) {
    // Looked up again after every abort, which could watch new ops.
    while (!timeouts_->lanes[i].entries.empty() && timeouts_->lanes[i].entries.front().when <= now) {
      Deadline d = std::move(timeouts_->lanes[i].entries.front());
      timeouts_->lanes[i].entries.pop_front();
      --timeouts_->count;
      auto w = d.work.lock();
      if (w && !w->completed)
        fire_timeout(engine_, w, *d.info, timeouts_->lanes[i].timeout, d.collective, d.context);
    }
  }
  for (const auto& l : timeouts_->lanes)
    if (!l.entries.empty() && (!next || l.entries.front().when < *next)) next = l.entries.front().when;
  if (timeouts_->after_sweep > timeouts_->count) timeouts_->after_sweep = timeouts_->count;
  if (next) arm(*next);
}

Communicator::Communicator(Transport& transport, CommunicatorOptions options)
    : Communicator(transport, std::make_shared<const CommunicatorOptions>(std::move(options))) {}

Communicator::Communicator(Transport& transport, std::shared_ptr<const CommunicatorOptions> options)
    : t_(transport),
      opts_(std::move(options)),
      rank_(transport.rank()),
      world_size_(transport.world_size()),
      engine_(transport, opts_->eager_threshold_bytes, opts_->scribble_completed_sends, opts_->first_send_id),
      created_at_(transport.now()) {
  // The world's identity is the whole world's (one for every rank).
  auto identity = world_identity(world_size_);
  auto w = std::allocate_shared<GroupState>(PoolAllocator<GroupState>{});
  w->id = 0;
  w->members = identity->members;
  w->digest = identity->digest;
  w->my_rank = rank_;
  w->p2p_context = 0;
  w->coll_context = 1;
  w->name = identity->name;
  engine_.register_context(w->p2p_context, identity, false);
  engine_.register_context(w->coll_context, std::move(identity), true);
  world_ = Group(std::move(w));
  t_.attach(&engine_);
}

Communicator::~Communicator() = default;

std::size_t Communicator::abort_pending(const std::string& why) {
  return engine_.abort_all(std::make_exception_ptr(Error(ErrorKind::kUsage, OpContext{rank_, "", "", -1, {}}, why)));
}

GroupState& Communicator::resolve(const Group& g) {
  check_group_alive(g, rank_, "");
  return *(g.is_world_default() ? world_.state() : g.state());
}
const GroupState& Communicator::resolve(const Group& g) const {
  return *(g.is_world_default() ? world_.state() : g.state());
}

void Communicator::invalid(const std::string& op, const GroupState& g, const std::string& detail,
                           std::vector<int> peers) const {
  throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, op, g.name, -1, std::move(peers)}, detail);
}

Group Communicator::new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) {
  ranks = new_group_members(std::move(ranks), world_size_, rank_);
  auto g = std::make_shared<GroupState>();
  g->id = ++groups_created_;
  g->digest = group_digest(ranks);
  g->name = name.empty() ? default_group_name(g->id, ranks) : std::move(name);
  g->members = std::make_shared<const std::vector<int>>(std::move(ranks));
  g->p2p_context = static_cast<std::uint32_t>(2 * g->id);
  g->coll_context = static_cast<std::uint32_t>(2 * g->id + 1);
  g->my_rank = index_in(*g, rank_);
  g->timeout_ns = timeout_ns;
  auto identity = std::make_shared<const GroupIdentity>(GroupIdentity{g->digest, g->name, g->members});
  engine_.register_context(g->p2p_context, identity, false);
  engine_.register_context(g->coll_context, std::move(identity), true);
  return Group(std::move(g));
}

void Communicator::destroy_group(const Group& g) { mark_group_destroyed(g, rank_); }

int Communicator::rank_in(const Group& g) const { return resolve(g).my_rank; }

int Communicator::group_rank(const Group& g, int global) const {
  const GroupState& s = resolve(g);
  const int r = index_in(s, global);
  if (r < 0) invalid("group_rank", s, "global rank " + std::to_string(global) + " is not in " + s.name);
  return r;
}

int Communicator::global_rank(const Group& g, int group_rank) const {
  const GroupState& s = resolve(g);
  if (group_rank < 0 || group_rank >= static_cast<int>(s.ranks().size()))
    invalid("global_rank", s, "group rank " + std::to_string(group_rank) + " is out of range for " + s.name +
                                  " of size " + std::to_string(s.ranks().size()));
  return s.ranks()[static_cast<std::size_t>(group_rank)];
}

// ---- point-to-point ---------------------------------------------------------

Work Communicator::send(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns) {
  return p2p(true, true, t, dst, tag, g, timeout_ns);
}
// poll_ns: the core's Works complete as the executor runs, polled or not.
Work Communicator::isend(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns, Nanos /*poll_ns*/) {
  return p2p(true, false, t, dst, tag, g, timeout_ns);
}
Work Communicator::recv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns) {
  return p2p(false, true, t, src, tag, g, timeout_ns);
}
Work Communicator::irecv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns, Nanos /*poll_ns*/) {
  return p2p(false, false, t, src, tag, g, timeout_ns);
}

Work Communicator::p2p(bool is_send, bool blocking, TensorView t, int peer, int tag, const Group& group,
                       Nanos timeout_ns) {
  GroupState& g = resolve(group);
  const std::string op = is_send ? (blocking ? "send" : "isend") : (blocking ? "recv" : "irecv");
  if (g.my_rank < 0) return completed_work(&t_, true, op + " on " + g.name + ": not a member");
  if (tag < 0) invalid(op, g, "tag " + std::to_string(tag) + " is negative; tags must be >= 0");
  const bool any = !is_send && peer == kAnySource;
  if (!any) {
    const char* what = is_send ? "dst" : "src";
    if (peer < 0 || peer >= world_size_)
      invalid(op, g, std::string(what) + " " + std::to_string(peer) + " is out of range for world size " +
                         std::to_string(world_size_));
    if (!std::binary_search(g.ranks().begin(), g.ranks().end(), peer))
      invalid(op, g, std::string(what) + " " + std::to_string(peer) + " is not a member of " + g.name, {peer});
  }
  if (is_send && blocking && peer == rank_)
    invalid(op, g, "a blocking send to itself can never complete; use isend and irecv", {peer});
  if (t.count > 0 && t.data == nullptr) invalid(op, g, "tensor has no data");
  check_space(op, g, {&t, 1}, "tensor");

  auto info = new_op(op, g, static_cast<std::int64_t>(++g.p2p_seq));
  info->is_send = is_send;
  info->any_source = any;
  info->peer = any ? -1 : peer;
  info->tag = tag;
  info->dtype = t.dtype;
  info->count = t.count;
  announce(*info);
  std::shared_ptr<WorkState> w;
  if (is_send) {
    SendSpec s;
    s.dst = peer;
    s.context = g.p2p_context;
    s.group_digest = g.digest;
    s.tag = tag;
    s.buf = t;
    w = engine_.send(s, info);
  } else {
    RecvSpec s;
    s.src = any ? kAnySource : peer;
    s.context = g.p2p_context;
    s.group_digest = g.digest;
    s.tag = tag;
    s.buf = t;
    w = engine_.recv(s, info);
  }
  w->info = info;
  watch(info, w, g, timeout_ns, false);
  return Work(std::move(w));
}

// ---- collectives ------------------------------------------------------------

void Communicator::check_space(const std::string& op, const GroupState& g, std::span<const TensorView> tensors,
                               const char* what) const {
  const MemorySpace want = t_.memory_space();
  auto name = [](MemorySpace m) { return m == MemorySpace::kHost ? "host" : "device"; };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].count == 0 || tensors[i].space == want) continue;
    invalid(op, g, std::string(what) + (tensors.size() > 1 ? "[" + std::to_string(i) + "]" : "") + " is in " +
                       name(tensors[i].space) + " memory, but this rank's transport keeps tensors in " + name(want) +
                       " memory (core/transport.h: memory_space())");
  }
}

void Communicator::check_root(const std::string& op, const GroupState& g, int root) const {
  if (root < 0 || root >= world_size_)
    invalid(op, g, "root " + std::to_string(root) + " is out of range for world size " + std::to_string(world_size_));
  if (!std::binary_search(g.ranks().begin(), g.ranks().end(), root))
    invalid(op, g, "root " + std::to_string(root) + " is not a member of " + g.name, {root});
}

Algorithm Communicator::choose(const std::string& op, CollectiveKind kind, const GroupState& g, std::size_t bytes,
                               const CollectiveOptions& o) const {
  Algorithm a = o.algorithm != Algorithm::kAuto ? o.algorithm : opts_->force_algorithm;
  if (a != Algorithm::kAuto) {
    if (algorithm_supports(a, kind)) return a;
    if (o.algorithm != Algorithm::kAuto)
      invalid(op, g, std::string("algorithm '") + std::string(algorithm_name(a)) + "' does not implement " + op);
  }
  return select_algorithm(kind, bytes, static_cast<int>(g.ranks().size()), opts_->selection);
}

namespace {

// The call's context and body live in this frame (one pooled allocation per
// call): `body(ctx)` makes the algorithm's coroutine. `engine` outlives the
// frame (the communicator's registry destroys it first). The context comes
// in made (a coroutine keeps each parameter and each local in its frame
// for its whole life: what the context is made of would be kept twice).
template <typename Body>
Spawned run_collective(MessageEngine& engine, CollectiveContext ctx, Body body) {
  std::exception_ptr err;
  try {
    co_await body(ctx);
  } catch (...) {
    err = std::current_exception();
  }
  // An algorithm stops at its first error: what it left posted ends with
  // the call, so that nothing of a call that ended writes into its buffers.
  if (err) engine.abort_collective(ctx.context(), ctx.seq(), err);
  engine.end_collective(ctx.context(), ctx.seq());
  ctx.call_work()->finish(err);
}

// The all_reduce algorithm `a` on `t` (not started: a Task is lazy).
Task<void> all_reduce_algorithm(CollectiveContext& c, Algorithm a, TensorView t, ReduceOp op, std::size_t seg) {
  // Every value is named: an algorithm added to Algorithm must be placed
  // here (-Werror=switch) before it can reach all_reduce.
  switch (a) {
    case Algorithm::kRing: return algorithms::ring_all_reduce(c, t, op, seg);
    case Algorithm::kHalvingDoubling: return algorithms::halving_doubling_all_reduce(c, t, op);
    case Algorithm::kRecursiveDoubling: return algorithms::recursive_doubling_all_reduce(c, t, op);
    case Algorithm::kAuto:
    case Algorithm::kBinomialTree:
    case Algorithm::kLinear:
    case Algorithm::kDissemination:
    case Algorithm::kBruck:
    case Algorithm::kPairwise:
      break;
  }
  throw Error(ErrorKind::kUsage, c.info().context(),
              "algorithm '" + std::string(algorithm_name(a)) + "' reached all_reduce, which it does not "
              "implement (core/algorithm.h's algorithms_for() and this switch disagree)");
}

// `algorithm`, then the division of an average.
Task<void> then_average(Task<void> algorithm, TensorView t, int n, Transport* tr) {
  co_await std::move(algorithm);
  if (t.count) {
    TransportCall in_call("finish_average()");
    tr->finish_average(t.data, t.count, t.dtype, n);
  }
}

}  // namespace

template <typename Body>
Work Communicator::launch(CollectiveCall call, Body body) {
  GroupState& g = *call.group;
  auto info = new_op(call.name, g, static_cast<std::int64_t>(call.fp.seq));
  info->fp = call.fp;
  info->wait_all_ranks = call.wait_all_ranks;
  auto outer = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  outer->executor = &t_;
  outer->posted_at = t_.now();
  outer->info = info;
  announce(*info);
  watch(info, outer, g, call.timeout_ns, true);
  engine_.begin_collective(g.coll_context, g.digest, call.fp, outer, info, g.members);
  if (outer->completed) return Work(outer);  // a peer's frames already disagreed
  CollectiveContext ctx(engine_, t_, g, call.fp, std::move(info), opts_->observer);
  ctx.bind(outer);
  ops_.spawn(run_collective(engine_, std::move(ctx), std::move(body)));
  return Work(outer);
}

Work Communicator::broadcast(TensorView t, int src, const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "broadcast on " + g.name + ": not a member");
  check_root("broadcast", g, src);
  check_space("broadcast", g, {&t, 1}, "tensor");
  const Algorithm a = choose("broadcast", CollectiveKind::kBroadcast, g, t.bytes(), o);
  const int root = index_in(g, src);
  CollectiveCall call{"broadcast", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kBroadcast, ReduceOp::kSum, static_cast<std::uint8_t>(a), t.dtype, src,
                        ++g.coll_seq, t.count};
  auto body = [t, root, a](CollectiveContext& c) {
    return a == Algorithm::kLinear ? algorithms::linear_broadcast(c, t, root)
                                   : algorithms::binomial_broadcast(c, t, root);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::reduce(TensorView t, int dst, ReduceOp op, const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "reduce on " + g.name + ": not a member");
  check_root("reduce", g, dst);
  check_space("reduce", g, {&t, 1}, "tensor");
  if (auto why = reduce_op_unsupported(op, t.dtype)) invalid("reduce", g, *why);
  const Algorithm a = choose("reduce", CollectiveKind::kReduce, g, t.bytes(), o);
  const int root = index_in(g, dst);
  const int n = static_cast<int>(g.ranks().size());
  CollectiveCall call{"reduce", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kReduce, op, static_cast<std::uint8_t>(a), t.dtype, dst, ++g.coll_seq,
                        t.count};
  Transport* tr = &t_;
  auto body = [t, root, a, op, n, tr](CollectiveContext& c) -> Task<void> {
    const ReduceOp combine = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    if (a == Algorithm::kLinear) {
      co_await algorithms::linear_reduce(c, t, root, combine);
    } else {
      co_await algorithms::binomial_reduce(c, t, root, combine);
    }
    if (op == ReduceOp::kAvg && c.rank() == root && t.count) {
      TransportCall in_call("finish_average()");
      tr->finish_average(t.data, t.count, t.dtype, n);
    }
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::all_reduce(TensorView t, ReduceOp op, const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "all_reduce on " + g.name + ": not a member");
  if (auto why = reduce_op_unsupported(op, t.dtype)) invalid("all_reduce", g, *why);
  check_space("all_reduce", g, {&t, 1}, "tensor");
  const Algorithm a = choose("all_reduce", CollectiveKind::kAllReduce, g, t.bytes(), o);
  const int n = static_cast<int>(g.ranks().size());
  CollectiveCall call{"all_reduce", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kAllReduce, op, static_cast<std::uint8_t>(a), t.dtype, -1, ++g.coll_seq,
                        t.count};
  Transport* tr = &t_;
  const std::size_t seg = opts_->selection.ring_segment_bytes;
  // Not a coroutine: it hands back the algorithm's own (a frame of its
  // own here would live as long as the call), but for an average, which
  // has a step after it.
  auto body = [t, a, op, n, tr, seg](CollectiveContext& c) -> Task<void> {
    Task<void> algorithm = all_reduce_algorithm(c, a, t, op == ReduceOp::kAvg ? ReduceOp::kSum : op, seg);
    if (op != ReduceOp::kAvg) return algorithm;
    return then_average(std::move(algorithm), t, n, tr);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::scatter(TensorView out, int src, std::span<const TensorView> list, const Group& group,
                           CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "scatter on " + g.name + ": not a member");
  check_root("scatter", g, src);
  const int n = static_cast<int>(g.ranks().size());
  if (rank_ == src) {
    if (static_cast<int>(list.size()) != n)
      invalid("scatter", g, "scatter_list has " + std::to_string(list.size()) + " tensors but " + g.name + " has " +
                                std::to_string(n) + " ranks");
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].dtype != out.dtype || list[i].count != out.count)
        invalid("scatter", g, "scatter_list[" + std::to_string(i) + "] is " + describe_tensor(list[i]) +
                                  " but the output tensor is " + describe_tensor(out));
  } else if (!list.empty()) {
    invalid("scatter", g, "scatter_list must be empty on non-source ranks (the source is rank " +
                              std::to_string(src) + ")");
  }
  check_space("scatter", g, {&out, 1}, "the output tensor");
  check_space("scatter", g, list, "scatter_list");
  const Algorithm a = choose("scatter", CollectiveKind::kScatter, g, out.bytes(), o);
  const int root = index_in(g, src);
  CollectiveCall call{"scatter", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kScatter, ReduceOp::kSum, static_cast<std::uint8_t>(a), out.dtype, src,
                        ++g.coll_seq, out.count};
  std::vector<TensorView> l(list.begin(), list.end());
  auto body = [out, l, root, a](CollectiveContext& c) {
    return a == Algorithm::kLinear ? algorithms::linear_scatter(c, out, l, root)
                                   : algorithms::binomial_scatter(c, out, l, root);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::gather(TensorView in, int dst, std::span<const TensorView> list, const Group& group,
                          CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "gather on " + g.name + ": not a member");
  check_root("gather", g, dst);
  const int n = static_cast<int>(g.ranks().size());
  if (rank_ == dst) {
    if (static_cast<int>(list.size()) != n)
      invalid("gather", g, "gather_list has " + std::to_string(list.size()) + " tensors but " + g.name + " has " +
                               std::to_string(n) + " ranks");
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].dtype != in.dtype || list[i].count != in.count)
        invalid("gather", g, "gather_list[" + std::to_string(i) + "] is " + describe_tensor(list[i]) +
                                 " but the input tensor is " + describe_tensor(in));
  } else if (!list.empty()) {
    invalid("gather", g, "gather_list must be empty on non-destination ranks (the destination is rank " +
                             std::to_string(dst) + ")");
  }
  check_space("gather", g, {&in, 1}, "the input tensor");
  check_space("gather", g, list, "gather_list");
  const Algorithm a = choose("gather", CollectiveKind::kGather, g, in.bytes(), o);
  const int root = index_in(g, dst);
  CollectiveCall call{"gather", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kGather, ReduceOp::kSum, static_cast<std::uint8_t>(a), in.dtype, dst,
                        ++g.coll_seq, in.count};
  std::vector<TensorView> l(list.begin(), list.end());
  auto body = [in, l, root, a](CollectiveContext& c) {
    return a == Algorithm::kLinear ? algorithms::linear_gather(c, in, l, root)
                                   : algorithms::binomial_gather(c, in, l, root);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::all_gather(std::span<const TensorView> list, TensorView in, const Group& group,
                              CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "all_gather on " + g.name + ": not a member");
  const int n = static_cast<int>(g.ranks().size());
  if (static_cast<int>(list.size()) != n)
    invalid("all_gather", g, "tensor_list has " + std::to_string(list.size()) + " tensors but " + g.name + " has " +
                                 std::to_string(n) + " ranks");
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].dtype != in.dtype || list[i].count != in.count)
      invalid("all_gather", g, "tensor_list[" + std::to_string(i) + "] is " + describe_tensor(list[i]) +
                                   " but the input tensor is " + describe_tensor(in));
  check_space("all_gather", g, {&in, 1}, "the input tensor");
  check_space("all_gather", g, list, "tensor_list");
  return launch_all_gather(g, algorithms::Blocks(std::vector<TensorView>(list.begin(), list.end())), in, o);
}

Work Communicator::all_gather_into_tensor(TensorView out, TensorView in, const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "all_gather_into_tensor on " + g.name + ": not a member");
  const std::size_t n = g.ranks().size();
  if (out.dtype != in.dtype || out.count != n * in.count)
    invalid("all_gather_into_tensor", g, "the output tensor is " + describe_tensor(out) + " but " + g.name + " has " +
                                             std::to_string(n) + " ranks and the input tensor is " +
                                             describe_tensor(in) + " (the output needs " +
                                             std::to_string(n * in.count) + " elements of its dtype)");
  check_space("all_gather_into_tensor", g, {&in, 1}, "the input tensor");
  check_space("all_gather_into_tensor", g, {&out, 1}, "the output tensor");
  return launch_all_gather(g, algorithms::Blocks(out, in.count), in, o);
}

Work Communicator::launch_all_gather(GroupState& g, algorithms::Blocks out, TensorView in,
                                     const CollectiveOptions& o) {
  const Algorithm a = choose("all_gather", CollectiveKind::kAllGather, g, in.bytes(), o);
  CollectiveCall call{"all_gather", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kAllGather, ReduceOp::kSum, static_cast<std::uint8_t>(a), in.dtype, -1,
                        ++g.coll_seq, in.count};
  auto body = [in, out = std::move(out), a](CollectiveContext& c) {
    return a == Algorithm::kBruck ? algorithms::bruck_all_gather(c, out, in) : algorithms::ring_all_gather(c, out, in);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& group,
                                  CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "reduce_scatter on " + g.name + ": not a member");
  const int n = static_cast<int>(g.ranks().size());
  if (static_cast<int>(list.size()) != n)
    invalid("reduce_scatter", g, "input_list has " + std::to_string(list.size()) + " tensors but " + g.name +
                                     " has " + std::to_string(n) + " ranks");
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].dtype != out.dtype || list[i].count != out.count)
      invalid("reduce_scatter", g, "input_list[" + std::to_string(i) + "] is " + describe_tensor(list[i]) +
                                       " but the output tensor is " + describe_tensor(out));
  check_space("reduce_scatter", g, {&out, 1}, "the output tensor");
  check_space("reduce_scatter", g, list, "input_list");
  return launch_reduce_scatter("reduce_scatter", g, out,
                               algorithms::Blocks(std::vector<TensorView>(list.begin(), list.end())), op, o);
}

Work Communicator::reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& group,
                                         CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "reduce_scatter_tensor on " + g.name + ": not a member");
  const std::size_t n = g.ranks().size();
  if (in.dtype != out.dtype || in.count != n * out.count)
    invalid("reduce_scatter_tensor", g, "the input tensor is " + describe_tensor(in) + " but " + g.name + " has " +
                                            std::to_string(n) + " ranks and the output tensor is " +
                                            describe_tensor(out) + " (the input needs " +
                                            std::to_string(n * out.count) + " elements of its dtype)");
  check_space("reduce_scatter_tensor", g, {&out, 1}, "the output tensor");
  check_space("reduce_scatter_tensor", g, {&in, 1}, "the input tensor");
  return launch_reduce_scatter("reduce_scatter_tensor", g, out, algorithms::Blocks(in, out.count), op, o);
}

Work Communicator::launch_reduce_scatter(const std::string& op_name, GroupState& g, TensorView out,
                                         algorithms::Blocks in, ReduceOp op, const CollectiveOptions& o) {
  if (auto why = reduce_op_unsupported(op, out.dtype)) invalid(op_name, g, *why);
  const Algorithm a = choose(op_name, CollectiveKind::kReduceScatter, g, out.bytes(), o);
  const int n = static_cast<int>(g.ranks().size());
  CollectiveCall call{op_name, &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kReduceScatter, op, static_cast<std::uint8_t>(a), out.dtype, -1,
                        ++g.coll_seq, out.count};
  Transport* tr = &t_;
  const std::size_t seg = opts_->selection.ring_segment_bytes;
  auto body = [out, in = std::move(in), a, op, n, tr, seg](CollectiveContext& c) -> Task<void> {
    const ReduceOp combine = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    if (a == Algorithm::kRing) {
      co_await algorithms::ring_reduce_scatter(c, out, in, combine, seg);
    } else {
      co_await algorithms::pairwise_reduce_scatter(c, out, in, combine);
    }
    if (op == ReduceOp::kAvg && out.count) {
      TransportCall in_call("finish_average()");
      tr->finish_average(out.data, out.count, out.dtype, n);
    }
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& group,
                              CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "all_to_all on " + g.name + ": not a member");
  const int n = static_cast<int>(g.ranks().size());
  for (const auto& [what, list] : {std::pair{"output_list", out}, std::pair{"input_list", in}})
    if (static_cast<int>(list.size()) != n)
      invalid("all_to_all", g, std::string(what) + " has " + std::to_string(list.size()) + " tensors but " + g.name +
                                   " has " + std::to_string(n) + " ranks");
  check_space("all_to_all", g, out, "output_list");
  check_space("all_to_all", g, in, "input_list");
  return launch_all_to_all("all_to_all", g, std::vector<TensorView>(out.begin(), out.end()),
                           std::vector<TensorView>(in.begin(), in.end()), o);
}

Work Communicator::all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                                     std::span<const std::size_t> in_splits, const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "all_to_all_single on " + g.name + ": not a member");
  const std::size_t n = g.ranks().size();
  check_space("all_to_all_single", g, {&out, 1}, "the output tensor");
  check_space("all_to_all_single", g, {&in, 1}, "the input tensor");
  std::vector<TensorView> out_blocks, in_blocks;
  try {
    out_blocks = split_blocks(out, out_splits, n, "output", g.name);
    in_blocks = split_blocks(in, in_splits, n, "input", g.name);
  } catch (const std::invalid_argument& e) {
    invalid("all_to_all_single", g, e.what());
  }
  return launch_all_to_all("all_to_all_single", g, std::move(out_blocks), std::move(in_blocks), o);
}

Work Communicator::launch_all_to_all(const std::string& op_name, GroupState& g, std::vector<TensorView> out,
                                     std::vector<TensorView> in, const CollectiveOptions& o) {
  const DType dtype = in[0].dtype;
  bool equal = true;
  for (const auto& [what, list] : {std::pair{"output", &out}, std::pair{"input", &in}})
    for (std::size_t i = 0; i < list->size(); ++i) {
      const TensorView& t = (*list)[i];
      if (t.dtype != dtype)
        invalid(op_name, g, std::string(what) + " block " + std::to_string(i) + " is " + describe_tensor(t) +
                                " but input block 0 is " + describe_tensor(in[0]) + " (one dtype for every block)");
      equal = equal && t.count == in[0].count;
    }
  const auto me = static_cast<std::size_t>(g.my_rank);
  if (out[me].count != in[me].count)
    invalid(op_name, g, "this rank's block to itself is " + describe_tensor(in[me]) + " in the input but " +
                            describe_tensor(out[me]) + " in the output");
  const Algorithm a = choose(op_name, CollectiveKind::kAllToAll, g, in[0].bytes(), o);
  if (a == Algorithm::kBruck && !equal)
    invalid(op_name, g, "algorithm 'bruck' needs blocks of one size; these differ (use pairwise)");
  CollectiveCall call{op_name, &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kAllToAll, ReduceOp::kSum, static_cast<std::uint8_t>(a), dtype, -1,
                        ++g.coll_seq, 0};
  auto body = [out = std::move(out), in = std::move(in), a](CollectiveContext& c) {
    return a == Algorithm::kBruck ? algorithms::bruck_all_to_all(c, out, in)
                                  : algorithms::pairwise_all_to_all(c, out, in);
  };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::barrier(const Group& group, CollectiveOptions o) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "barrier on " + g.name + ": not a member");
  const Algorithm a = choose("barrier", CollectiveKind::kBarrier, g, 0, o);
  CollectiveCall call{"barrier", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kBarrier, ReduceOp::kSum, static_cast<std::uint8_t>(a), DType::kUInt8, -1,
                        ++g.coll_seq, 0};
  auto body = [](CollectiveContext& c) { return algorithms::dissemination_barrier(c); };
  call.timeout_ns = o.timeout_ns;
  return launch(std::move(call), std::move(body));
}

Work Communicator::monitored_barrier(const Group& group, Nanos timeout_ns, bool wait_all_ranks) {
  GroupState& g = resolve(group);
  if (g.my_rank < 0) return completed_work(&t_, true, "monitored_barrier on " + g.name + ": not a member");
  if (timeout_ns < 0) invalid("monitored_barrier", g, "timeout " + std::to_string(timeout_ns) + " ns is negative");
  CollectiveCall call{"monitored_barrier", &g, {}, {}};
  call.fp = Fingerprint{CollectiveKind::kMonitoredBarrier, ReduceOp::kSum, static_cast<std::uint8_t>(Algorithm::kLinear),
                        DType::kUInt8, g.ranks()[0], ++g.coll_seq, 0};
  call.timeout_ns = timeout_ns;
  call.wait_all_ranks = wait_all_ranks;
  return launch(std::move(call), [](CollectiveContext& c) { return algorithms::monitored_barrier(c); });
}

std::vector<std::string> Communicator::describe_pending() const { return engine_.describe_pending(); }

}  // namespace collie
