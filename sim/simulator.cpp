#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "core/error.h"
#include "sim/rounding.h"
#include "sim/streaming_copy.h"

namespace collie::sim {

namespace {

Nanos bytes_to_ns(std::uint64_t bytes, double GBps) {
  if (GBps <= 0) return 0;
  return static_cast<Nanos>(round_half_away(static_cast<double>(bytes) / GBps));
}
}  // namespace

// A rank's transport and its state in the simulation, in one cache line:
// every event touches its rank's.
class alignas(64) Simulator::Endpoint final : public Transport {
 public:
  Endpoint(Simulator& s, int r) : sim(s), rank_(r) {}
  int rank() const override { return rank_; }
  int world_size() const override { return sim.world_size_; }
  void attach(FrameSink* s) override { sink = s; }
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override {
    sim.post_send(rank_, h, payload, cookie);
  }
  void schedule(std::coroutine_handle<> h) override { sim.push(sim.now_, EventKind::kResume, rank_, h.address()); }
  void schedule_after_compute(std::uint64_t bytes, std::coroutine_handle<> h) override {
    sim.schedule_after_compute(rank_, bytes, h);
  }
  bool charges_compute_time() const override { return true; }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override {
    // `when` is on this rank's (possibly skewed) clock.
    const double global =
        skewed ? (static_cast<double>(when) - skew().offset_ns) / skew().rate : static_cast<double>(when);
    sim.push(std::max(sim.now_, static_cast<Nanos>(std::ceil(global))), EventKind::kResume, rank_, h.address());
  }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override {
    return sim.run_until(done, deadline);
  }
  Nanos now() const override { return skewed ? sim.local_time(rank_, sim.now_) : sim.now_; }

  bool moves_payloads() const override { return !sim.timing_only_; }

  // Memory: skipped in timing-only mode, where tensors have no bytes;
  // logged with deferred memory.
  MemorySpace memory_space() const override { return sim.deferred_ ? MemorySpace::kDevice : MemorySpace::kHost; }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (sim.timing_only_) return;
    if (sim.deferred_) {
      sim.before_write(dst, bytes);
      sim.deferred_->copy(dst, src, bytes);
      return;
    }
    streaming_copy(dst, src, bytes);
  }
  void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) override {
    if (sim.timing_only_) return;
    if (sim.deferred_) {
      sim.before_write(dst, count * dtype_size(dtype));
      sim.deferred_->reduce(dst, src, count, dtype, op);
      return;
    }
    Transport::reduce(dst, src, count, dtype, op);
  }
  void finish_average(void* dst, std::size_t count, DType dtype, int divisor) override {
    if (sim.timing_only_) return;
    if (sim.deferred_) {
      sim.before_write(dst, count * dtype_size(dtype));
      sim.deferred_->finish_average(dst, count, dtype, divisor);
      return;
    }
    Transport::finish_average(dst, count, dtype, divisor);
  }
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override {
    if (sim.timing_only_) return nullptr;
    std::shared_ptr<std::byte> p = Transport::allocate(bytes);
    if (!sim.deferred_ || !p) return p;
    // Freed once the log is done with it (and eager payloads read from it have their own copies).
    Simulator* s = &sim;
    std::byte* raw = p.get();
    return std::shared_ptr<std::byte>(raw, [s, p, bytes](std::byte*) mutable { s->release_deferred(std::move(p), bytes); });
  }

  const Skew& skew() const { return sim.skews_[static_cast<std::size_t>(rank_)]; }

  Simulator& sim;
  FrameSink* sink = nullptr;
  Nanos clock = 0;        // virtual time of the rank's latest event
  Nanos nic_free = 0;     // when its NIC is free to inject the next message
  Nanos cpu_free = 0;     // cpu_bound, and reductions: when its CPU is free
  double slow = 1.0;      // factor on its CPU and injection costs (slow-rank faults, time slicing)
  bool crashed = false;
  bool out_of_cache = false;  // its last received frame's op did not fit the caches
  bool skewed = false;        // its clock runs as skews_[rank] says

 private:
  const int rank_;
};

Simulator::Endpoint& Simulator::ep(int rank) {
  static_assert(sizeof(Endpoint) == 64, "a rank's endpoint and state fill one cache line");
  static_assert(sizeof(InFlight) == 128, "a frame in flight fills two cache lines");
  return endpoints_[static_cast<std::size_t>(rank)];
}
const Simulator::Endpoint& Simulator::ep(int rank) const { return endpoints_[static_cast<std::size_t>(rank)]; }

Simulator::Simulator(int world_size, std::uint64_t seed, NetworkModel model, FaultPlan faults)
    : world_size_(world_size), seed_(seed), model_(model), prng_(seed), plan_(std::move(faults)) {
  const auto n = static_cast<std::size_t>(world_size);
  if (world_size >= kHugePagesFromRanks) huge_pages_ = std::make_unique<HeapHugePages>();
  endpoints_.reserve(n);
  for (int r = 0; r < world_size; ++r) endpoints_.emplace_back(*this, r);
  if (huge_pages_) HeapHugePages::advise(endpoints_.data(), n * sizeof(Endpoint));
  // A collective has about one frame per rank in flight at its peak: room
  // for that from the start, so the store does not double (and copy) while
  // the run grows.
  frames_in_flight_.reserve(n);
  free_frames_.reserve(n);
  if (huge_pages_) HeapHugePages::advise(frames_in_flight_.data(), n * sizeof(InFlight));
  const int per_node = model_.ranks_per_node > 0 ? std::min(model_.ranks_per_node, world_size) : world_size;
  oversubscribed_ = model_.cpu_bound && model_.cores_per_node > 0 && per_node > model_.cores_per_node;
  // Time slicing slows every rank of an oversubscribed node's CPU work, as a
  // slow-rank fault slows one rank's: both scale Endpoint::slow.
  if (oversubscribed_ && model_.oversubscribed_cpu_factor > 0)
    for (Endpoint& e : endpoints_) e.slow = model_.oversubscribed_cpu_factor;
  fault_names_ = plan_.describe();
  auto valid = [&](int r) { return r >= 0 && r < world_size; };
  for (const auto& s : plan_.slow)
    if (valid(s.rank)) ep(s.rank).slow *= s.factor;
  for (const auto& s : plan_.skews) {
    if (!valid(s.rank)) continue;
    if (skews_.empty()) skews_.assign(n, Skew{});
    skews_[static_cast<std::size_t>(s.rank)] = Skew{s.rate, s.offset_us * 1000.0};
    ep(s.rank).skewed = s.rate != 1.0 || s.offset_us != 0.0;
  }
  for (const auto& c : plan_.crashes)
    if (valid(c.rank) && c.at_ns) push(*c.at_ns, EventKind::kCrash, c.rank, nullptr);
}

Nanos Simulator::local_time(int r, Nanos t) const {
  const Endpoint& e = ep(r);
  if (!e.skewed) return t;
  return static_cast<Nanos>(round_half_away(e.skew().offset_ns + e.skew().rate * static_cast<double>(t)));
}

Nanos Simulator::rank_clock(int r) const { return ep(r).clock; }
bool Simulator::crashed(int r) const { return ep(r).crashed; }

void Simulator::enable_trace() {
  if (!trace_) trace_ = std::make_unique<TraceRecorder>(world_size_);
}

void Simulator::record(FaultRecord::Kind kind, int src, int dst, const FrameHeader& h, const std::string& fault) {
  FaultRecord r;
  r.kind = kind;
  r.time = now_;
  r.rank = src;
  r.dst = dst;
  r.header = h;
  r.fault = fault;
  if (trace_) trace_->fault(kind == FaultRecord::Kind::kDeadDestination ? dst : src, now_, r.describe());
  records_.push_back(std::move(r));
}

void Simulator::crash(int rank, const std::string& why, int plan_index) {
  if (ep(rank).crashed) return;
  ep(rank).crashed = true;
  record(FaultRecord::Kind::kCrash, rank, -1, FrameHeader{}, why);
  if (plan_index < 0) return;
  const Crash& c = plan_.crashes[static_cast<std::size_t>(plan_index)];
  if (!c.detect_ns) return;
  for (int p = 0; p < world_size_; ++p)
    if (p != rank) push(now_ + *c.detect_ns, EventKind::kPeerLost, p, nullptr, static_cast<std::uint32_t>(rank));
}

double Simulator::sample_delay_ns(const MessageFault& f) {
  switch (f.distribution) {
    case MessageFault::Distribution::kFixed: return f.delay_us * 1000.0;
    case MessageFault::Distribution::kUniform:
      return (f.delay_us + (f.delay_max_us - f.delay_us) * prng_.uniform()) * 1000.0;
    case MessageFault::Distribution::kExponential:
      return -std::log(1.0 - prng_.uniform()) * f.delay_us * 1000.0;
  }
  return 0;
}

void Simulator::op_begin(int rank, std::uint64_t id, const OpInfo& info, Nanos now) {
  if (trace_) {
    std::string name = info.op;
    if (info.seq >= 0) name += " #" + std::to_string(info.seq);
    name += " on " + info.group;
    trace_->op_begin(rank, id, name, now_);
  }
  (void)now;
  for (std::size_t i = 0; i < plan_.crashes.size(); ++i) {
    const Crash& c = plan_.crashes[i];
    if (c.rank == rank && c.at_op != 0 && c.at_op == id)
      crash(rank, fault_names_[plan_.messages.size() + plan_.partitions.size() + plan_.degradations.size() + i],
            static_cast<int>(i));
  }
}

void Simulator::op_end(int rank, std::uint64_t id, const std::string& error, Nanos now) {
  (void)now;
  if (trace_) trace_->op_end(rank, id, error, now_);
}

void Simulator::step_begin(int rank, std::uint64_t id, const std::string& step, Nanos now) {
  (void)now;
  if (trace_) trace_->step(rank, id, step, now_);
  for (std::size_t i = 0; i < plan_.crashes.size(); ++i) {
    const Crash& c = plan_.crashes[i];
    if (c.rank == rank && !c.at_step.empty() && step.rfind(c.at_step, 0) == 0)
      crash(rank, fault_names_[plan_.messages.size() + plan_.partitions.size() + plan_.degradations.size() + i],
            static_cast<int>(i));
  }
}

bool Simulator::wants_steps() const {
  return trace_ || std::any_of(plan_.crashes.begin(), plan_.crashes.end(),
                               [](const Crash& c) { return !c.at_step.empty(); });
}

Simulator::~Simulator() = default;

Transport& Simulator::transport(int rank) { return ep(rank); }

void Simulator::defer_memory(DeferredMemoryOptions options) { deferred_ = std::make_unique<DeferredMemory>(options); }

void Simulator::synchronize_memory() {
  if (!deferred_) return;
  // Frames still in flight stop reading their senders' buffers: the host may
  // touch those from now on.
  while (!snapshots_.empty()) materialize(snapshots_.begin());
  deferred_->flush();
}

std::multimap<std::uintptr_t, Simulator::Snapshot>::iterator Simulator::track_snapshot(std::uint32_t slot,
                                                                                     const std::byte* src,
                                                                                     std::size_t bytes) {
  const auto from = reinterpret_cast<std::uintptr_t>(src);
  return snapshots_.emplace(from, Snapshot{from + bytes, slot});
}

void Simulator::materialize(std::multimap<std::uintptr_t, Snapshot>::iterator it) {
  const std::uintptr_t from = it->first;
  const std::size_t bytes = it->second.end - from;
  const std::uint32_t slot = it->second.slot;
  snapshots_.erase(it);
  // The copy lies as far into the log's period as the bytes it copies, so
  // that copying into it, and out of it to where they go, stay column-blocked.
  const std::size_t period = deferred_->period_bytes();
  std::shared_ptr<std::byte> block(new std::byte[bytes + period], std::default_delete<std::byte[]>());
  const auto base = reinterpret_cast<std::uintptr_t>(block.get());
  const std::uintptr_t at = base + (from % period + period - base % period) % period;
  auto* copy = reinterpret_cast<std::byte*>(at);
  deferred_->copy(copy, reinterpret_cast<const std::byte*>(from), bytes);
  frames_in_flight_[slot].borrowed = copy;
  if (materialized_.size() <= slot) materialized_.resize(frames_in_flight_.size());
  materialized_[slot] = std::shared_ptr<std::byte>(block, copy);
}

void Simulator::before_write(const void* dst, std::size_t bytes) {
  if (snapshots_.empty() || bytes == 0) return;
  const auto from = reinterpret_cast<std::uintptr_t>(dst);
  const std::uintptr_t to = from + bytes;
  // A snapshot is at most the eager threshold long.
  const std::size_t longest = model_.eager_threshold_bytes;
  auto it = snapshots_.lower_bound(from > longest ? from - longest : 0);
  while (it != snapshots_.end() && it->first < to) {
    if (it->second.end > from) {
      auto next = std::next(it);
      materialize(it);
      it = next;
    } else {
      ++it;
    }
  }
}

void Simulator::release_deferred(std::shared_ptr<std::byte> memory, std::size_t bytes) {
  before_write(memory.get(), bytes);
  deferred_->retain(std::move(memory), bytes);
}

void Simulator::push(Nanos time, EventKind kind, int rank, void* ptr, std::uint32_t frame) {
  const std::uint64_t payload = ptr ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(ptr)) : frame;
  queue_.push(Event{time, prng_.next(), order_++, payload, rank, static_cast<std::uint8_t>(kind)});
}

void Simulator::post_send(int src, const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  Endpoint& sender = ep(src);
  if (sender.crashed) return;  // a crashed rank sends nothing
  const bool same_node = model_.ranks_per_node <= 0 || src / model_.ranks_per_node == h.dst / model_.ranks_per_node;
  const LinkModel& link = same_node ? model_.intra : model_.inter;
  double bandwidth = link.bandwidth_GBps;
  if (model_.memory_bandwidth_GBps > 0 && out_of_cache(h)) {
    // A message that does not fit streams from memory at both ends; a
    // segment of a tensor that does not fit only at one (the other has it in
    // cache: just reduced, or about to be forwarded): half of each byte's
    // cost at each rate.
    const double memory = model_.memory_bandwidth_GBps;
    bandwidth = std::min(bandwidth, h.bytes > model_.cache_bytes ? memory : 2.0 / (1.0 / bandwidth + 1.0 / memory));
  }
  double alpha = link.alpha_us * 1000.0;
  for (const LinkDegradation& d : plan_.degradations) {
    if (!d.window.contains(now_)) continue;
    bool hits = false;
    switch (d.scope) {
      case LinkDegradation::Scope::kPair: hits = (src == d.a && h.dst == d.b) || (src == d.b && h.dst == d.a); break;
      case LinkDegradation::Scope::kNode: {
        const int per = model_.ranks_per_node > 0 ? model_.ranks_per_node : world_size_;
        hits = src / per == d.a || h.dst / per == d.a;
        break;
      }
      case LinkDegradation::Scope::kInterNode: hits = !same_node; break;
    }
    if (hits) {
      bandwidth *= d.bandwidth_factor;
      alpha += d.added_latency_us * 1000.0;
    }
  }
  Nanos start = explorer_ ? now_ : std::max(now_, sender.nic_free);
  const double bytes_ns = explorer_ ? 0.0 : static_cast<double>(bytes_to_ns(h.bytes, bandwidth));
  Nanos inject = static_cast<Nanos>(round_half_away(bytes_ns * sender.slow));
  if (explorer_) alpha = 0;
  if (model_.jitter_fraction > 0 && !explorer_) alpha *= 1.0 + model_.jitter_fraction * prng_.uniform();
  const Nanos alpha_ns = static_cast<Nanos>(round_half_away(alpha));
  Nanos arrival = start + inject + alpha_ns;
  if (model_.cpu_bound && !explorer_) {
    Endpoint& receiver = ep(h.dst);
    // The overhead is per message; a rendezvous's RTS and CTS are header
    // frames the transport handles within the message's own processing.
    const bool control = h.kind == FrameKind::kRts || h.kind == FrameKind::kCts;
    const double per_message_us = model_.overhead_us + (oversubscribed_ ? model_.oversubscribed_overhead_us : 0);
    // Each end's CPU cost, the overhead included, scales with its rank's
    // slowness (a slow-rank fault, time slicing).
    const double cost_ns = (control ? 0.0 : per_message_us * 1000.0) + bytes_ns;
    const Nanos o = control ? 0 : static_cast<Nanos>(round_half_away(per_message_us * 1000.0 * sender.slow));
    const Nanos dur = static_cast<Nanos>(round_half_away(cost_ns * sender.slow));
    start = claim_core(src, std::max(now_, sender.cpu_free), dur);
    sender.cpu_free = start + dur;
    inject = dur;
    const Nanos rx_dur = static_cast<Nanos>(round_half_away(cost_ns * receiver.slow));
    const Nanos rx_start = claim_core(h.dst, std::max(start + o + alpha_ns, receiver.cpu_free), rx_dur);
    arrival = std::max(rx_start + rx_dur, start + dur + alpha_ns);
    receiver.cpu_free = arrival;
  }
  sender.nic_free = start + inject;

  // Message faults, in plan order.
  const bool first_frame = h.kind == FrameKind::kEager || h.kind == FrameKind::kRts;
  bool duplicate = false;
  for (std::size_t i = 0; i < plan_.messages.size(); ++i) {
    const MessageFault& f = plan_.messages[i];
    if ((f.src >= 0 && f.src != src) || (f.dst >= 0 && f.dst != h.dst) || !f.window.contains(now_)) continue;
    bool hit;
    if (f.nth) {
      hit = first_frame && ++nth_counts_[{i, src, h.dst}] == f.nth;
    } else {
      hit = f.probability >= 1.0 || prng_.uniform() < f.probability;
    }
    if (!hit) continue;
    switch (f.kind) {
      case MessageFault::Kind::kDrop:
        record(FaultRecord::Kind::kDrop, src, h.dst, h, fault_names_[i]);
        // The sender cannot tell: its send completes as if the frame left.
        if (cookie) push(start + inject, EventKind::kSendComplete, src, cookie);
        return;
      case MessageFault::Kind::kDelay:
        arrival += static_cast<Nanos>(round_half_away(sample_delay_ns(f)));
        record(FaultRecord::Kind::kDelay, src, h.dst, h, fault_names_[i]);
        break;
      case MessageFault::Kind::kReorder:
        arrival += static_cast<Nanos>(round_half_away(sample_delay_ns(f)));
        record(FaultRecord::Kind::kReorder, src, h.dst, h, fault_names_[i]);
        break;
      case MessageFault::Kind::kDuplicate:
        duplicate = true;
        record(FaultRecord::Kind::kDuplicate, src, h.dst, h, fault_names_[i]);
        break;
    }
  }
  for (std::size_t i = 0; i < plan_.partitions.size(); ++i) {
    const Partition& p = plan_.partitions[i];
    if (!p.window.contains(now_)) continue;
    auto in = [](const std::vector<int>& side, int r) { return std::find(side.begin(), side.end(), r) != side.end(); };
    auto in_b = [&](int r) { return p.b.empty() ? !in(p.a, r) : in(p.b, r); };
    const bool cut = (in(p.a, src) && in_b(h.dst)) || (!p.one_way && in_b(src) && in(p.a, h.dst));
    if (!cut) continue;
    record(FaultRecord::Kind::kPartition, src, h.dst, h, fault_names_[plan_.messages.size() + i]);
    if (cookie) push(start + inject, EventKind::kSendComplete, src, cookie);
    return;
  }

  const std::uint32_t slot = alloc_frame();
  InFlight& f = frames_in_flight_[slot];
  f.header = h;
  // Payloads up to the eager threshold are buffered when posted (the eager
  // buffer of a real transport) and the send completes at injection; larger
  // ones are read from the sender's buffer at delivery, and the send completes
  // then, so the simulator holds no copy of them.
  if (timing_only_ && (h.kind == FrameKind::kEager || h.kind == FrameKind::kData)) payload = {};
  const bool data = h.kind == FrameKind::kEager || h.kind == FrameKind::kData;
  if (h.bytes <= model_.eager_threshold_bytes) {
    f.cookie = nullptr;
    if (deferred_ && data && !payload.empty()) {
      f.borrowed = payload.data();  // read at delivery, or copied before anything writes there
      keep(slot, {}, start);
      track_snapshot(slot, payload.data(), payload.size());
    } else {
      f.borrowed = nullptr;
      keep(slot, payload, start);
    }
    if (cookie) push(start + inject, EventKind::kSendComplete, src, cookie);
  } else {
    f.borrowed = payload.data();
    f.cookie = cookie;
    keep(slot, {}, start);
  }
  push(arrival, EventKind::kDeliver, h.dst, nullptr, slot);
  if (duplicate) {
    // A second copy, a little later, always with its own bytes.
    const std::uint32_t dup = alloc_frame();
    InFlight& d = frames_in_flight_[dup];
    d.header = h;
    d.cookie = nullptr;
    d.borrowed = nullptr;
    if (deferred_ && data && !payload.empty()) {
      // Its own copy, made in the log now (the sender's bytes as they are at the post).
      keep(dup, {}, start);
      materialize(track_snapshot(dup, payload.data(), payload.size()));
    } else {
      keep(dup, payload, start);
    }
    push(arrival + static_cast<Nanos>(round_half_away(alpha)) + 1, EventKind::kDeliver, h.dst, nullptr, dup);
  }
}

void Simulator::keep(std::uint32_t slot, std::span<const std::byte> copy, Nanos sent_at) {
  const std::uint64_t message_id = next_message_id_++;
  if (!copy.empty() || slot < copies_.size()) {
    if (copies_.size() <= slot) copies_.resize(frames_in_flight_.size());
    copies_[slot].assign(copy.begin(), copy.end());
  }
  if (trace_) {
    if (flows_.size() <= slot) flows_.resize(frames_in_flight_.size());
    flows_[slot] = Flow{message_id, sent_at};
  }
}

std::uint32_t Simulator::alloc_frame() {
  if (!free_frames_.empty()) {
    const std::uint32_t slot = free_frames_.back();
    free_frames_.pop_back();
    return slot;
  }
  frames_in_flight_.emplace_back();
  return static_cast<std::uint32_t>(frames_in_flight_.size() - 1);
}

bool Simulator::out_of_cache(const FrameHeader& h) const {
  if (model_.cache_bytes == 0) return false;
  // The working set: the message, or the collective's per-rank tensor it is
  // a segment of (a ring's segments of a large tensor come from memory).
  std::uint64_t op_bytes = h.fp.op != CollectiveKind::kNone ? h.fp.count * dtype_size(h.fp.dtype) : 0;
  // all_gather's count is its input and reduce_scatter's its output; the
  // other side is n times that (n: the world here -- frames do not carry
  // the group's size). all_to_all carries no count: its message is the
  // working set's measure.
  if (h.fp.op == CollectiveKind::kAllGather || h.fp.op == CollectiveKind::kReduceScatter)
    op_bytes *= static_cast<std::uint64_t>(world_size_);
  return std::max<std::uint64_t>(h.bytes, op_bytes) > model_.cache_bytes;
}

Nanos Simulator::claim_core(int rank, Nanos t, Nanos dur) {
  if (model_.cores_per_node <= 0) return t;
  const int per = model_.ranks_per_node > 0 ? model_.ranks_per_node : world_size_;
  const auto node = static_cast<std::size_t>(rank / per);
  if (core_free_.size() <= node) core_free_.resize(node + 1);
  auto& cores = core_free_[node];
  if (cores.empty()) cores.assign(static_cast<std::size_t>(model_.cores_per_node), 0);
  auto first = std::min_element(cores.begin(), cores.end());
  const Nanos at = std::max(t, *first);
  *first = at + dur;
  return at;
}

void Simulator::schedule_after_compute(int rank, std::uint64_t bytes, std::coroutine_handle<> h) {
  if (explorer_) {
    push(now_, EventKind::kResume, rank, h.address());
    return;
  }
  Endpoint& e = ep(rank);
  Nanos& cpu = e.cpu_free;
  const double gamma = e.out_of_cache && model_.memory_reduce_GBps > 0
                           ? model_.memory_reduce_GBps
                           : model_.reduce_GBps;
  const Nanos dur = static_cast<Nanos>(round_half_away(static_cast<double>(bytes_to_ns(bytes, gamma)) *
                                                    e.slow));
  cpu = claim_core(rank, std::max(now_, cpu), dur) + dur;
  push(cpu, EventKind::kResume, rank, h.address());
}

void Simulator::mix(std::uint64_t v) {
  hash_ ^= v + 0x9e3779b97f4a7c15ull + (hash_ << 6) + (hash_ >> 2);
  hash_ *= 0x100000001b3ull;
}

void Simulator::prefetch(const Event& e) const {
  // At 10^5 ranks an event's rank, frame and coroutine are out of every
  // cache; asking for them one event ahead overlaps those misses with the
  // current event's work. (Only a hint: it reads and changes nothing.)
  __builtin_prefetch(&endpoints_[static_cast<std::size_t>(e.rank)]);
  switch (static_cast<EventKind>(e.kind)) {
    case EventKind::kDeliver: {
      const auto* f = reinterpret_cast<const char*>(&frames_in_flight_[e.frame()]);
      __builtin_prefetch(f);
      __builtin_prefetch(f + 64);
      break;
    }
    case EventKind::kResume: __builtin_prefetch(e.ptr()); break;
    default: break;
  }
}

namespace {
// How far ahead in the current time's batch prefetch_ahead() reaches: at
// kFarEvents an event's own lines (its rank's Endpoint, its frame or its
// coroutine), at kNearEvents the lines found through them (the frame sink the
// Endpoint points to), by then cached.
constexpr std::size_t kFarEvents = 6;
constexpr std::size_t kNearEvents = 3;
constexpr int kSinkLines = 2;
}  // namespace

void Simulator::prefetch_ahead() {
  if (const Event* f = queue_.upcoming(kFarEvents)) prefetch(*f);
  if (const Event* n = queue_.upcoming(kNearEvents)) {
    const auto kind = static_cast<EventKind>(n->kind);
    if (kind == EventKind::kDeliver || kind == EventKind::kSendComplete) {
      const auto* sink = reinterpret_cast<const char*>(endpoints_[static_cast<std::size_t>(n->rank)].sink);
      for (int i = 0; i < kSinkLines; ++i) __builtin_prefetch(sink + 64 * i);
    }
  }
}

void Simulator::process(const Event& e) {
  ++events_;
  Endpoint& at = ep(e.rank);
  const auto kind = static_cast<EventKind>(e.kind);
  if (at.crashed && kind != EventKind::kDeliver) return;  // a crashed rank does nothing
  at.clock = now_;
  switch (kind) {
    case EventKind::kCrash: {
      int index = -1;
      for (std::size_t i = 0; i < plan_.crashes.size() && index < 0; ++i)
        if (plan_.crashes[i].rank == e.rank && plan_.crashes[i].at_ns && *plan_.crashes[i].at_ns == e.time)
          index = static_cast<int>(i);
      crash(e.rank,
            index < 0 ? std::string("crash at time")
                      : fault_names_[plan_.messages.size() + plan_.partitions.size() + plan_.degradations.size() +
                                     static_cast<std::size_t>(index)],
            index);
      return;
    }
    case EventKind::kPeerLost:
      // A live rank's transport notices that rank e.frame's connection died.
      at.sink->on_peer_lost(static_cast<int>(e.frame()),
                            "rank " + std::to_string(e.frame()) + " crashed (its connection was reset)", false);
      return;
    case EventKind::kResume:
      std::coroutine_handle<>::from_address(e.ptr()).resume();
      return;
    case EventKind::kSendComplete:
      at.sink->on_send_complete(e.ptr());
      return;
    case EventKind::kDeliver: {
      // Move the frame out first: the sink may post sends that reuse slots.
      const std::uint32_t slot = e.frame();
      const InFlight f = frames_in_flight_[slot];
      std::span<const std::byte> payload;
      std::shared_ptr<std::byte> own;  // deferred memory: the payload's own copy, freed after on_frame()
      if (f.borrowed) {
        payload = std::span<const std::byte>(f.borrowed, f.header.bytes);
        if (deferred_) {
          if (slot < materialized_.size() && materialized_[slot]) {
            own = std::move(materialized_[slot]);
          } else {
            const auto key = reinterpret_cast<std::uintptr_t>(f.borrowed);
            for (auto [it, end] = snapshots_.equal_range(key); it != end; ++it)
              if (it->second.slot == slot) {
                snapshots_.erase(it);
                break;
              }
          }
        }
      } else if (slot < copies_.size()) {
        delivering_.swap(copies_[slot]);
        payload = delivering_;
      }
      free_frames_.push_back(slot);
      const FrameHeader& h = f.header;
      if (at.crashed) {
        if (own) release_deferred(std::move(own), payload.size());
        record(FaultRecord::Kind::kDeadDestination, h.src, h.dst, h, "");
        return;
      }
      if (f.cookie) {
        // The sender's endpoint and frame sink are needed after on_frame():
        // ask for them now, so their misses overlap the receiver's work.
        const Endpoint& sender = ep(h.src);
        __builtin_prefetch(sender.sink);
      }
      if (trace_) {
        std::string label = h.fp.op != CollectiveKind::kNone ? collective_name(h.fp.op) : std::string("p2p");
        label += " tag " + std::to_string(h.tag) + " (" + std::to_string(h.bytes) + " B)";
        if (slot < flows_.size() && flows_[slot].message_id != 0)
          trace_->message(flows_[slot].message_id, h.src, h.dst, flows_[slot].sent_at, now_, label);
      }
      ++frames_;
      at.out_of_cache = out_of_cache(h);
      bytes_ += h.bytes;
      mix(static_cast<std::uint64_t>(now_));
      mix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(h.src)) << 32) |
          static_cast<std::uint32_t>(h.dst));
      mix((static_cast<std::uint64_t>(h.kind) << 56) ^ (static_cast<std::uint64_t>(h.context) << 24) ^
          static_cast<std::uint32_t>(h.tag));
      // The id's low 32 bits: checking runs number sends from 2^32 + 1
      // (CommunicatorOptions::first_send_id), and their hash is a timing-only
      // run's, which numbers them from 1.
      mix(h.channel_seq ^ ((h.rendezvous_id & 0xffffffffu) << 20) ^ (h.fp.seq << 40));
      mix(h.bytes);
      ep(h.dst).sink->on_frame(h, payload);
      if (own) release_deferred(std::move(own), payload.size());
      if (f.cookie) {
        Endpoint& sender = ep(h.src);
        sender.clock = std::max(sender.clock, now_);
        sender.sink->on_send_complete(f.cookie);
      }
      return;
    }
  }
}

// Exploration: among the events of the earliest time, everything but
// deliveries first (in insertion order); then, at the lowest-numbered
// receiver, the first pending frame of one sender, chosen by the explorer
// when several senders have frames pending.
bool Simulator::pop_explored(Event& out) {
  // The explorer's rules pick among every pending event: all of them out of
  // the queue, the rest back in.
  std::vector<Event> heap_ = queue_.take_all();
  Nanos t = heap_.front().time;
  for (const Event& e : heap_) t = std::min(t, e.time);
  std::size_t best = heap_.size();
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    const Event& e = heap_[i];
    if (e.time != t || static_cast<EventKind>(e.kind) == EventKind::kDeliver) continue;
    if (best == heap_.size() || e.order < heap_[best].order) best = i;
  }
  if (best == heap_.size()) {
    int dst = world_size_;
    for (const Event& e : heap_)
      if (e.time == t) dst = std::min(dst, e.rank);
    // The earliest frame per sender at `dst`.
    std::map<int, std::size_t> first;
    for (std::size_t i = 0; i < heap_.size(); ++i) {
      const Event& e = heap_[i];
      if (e.time != t || e.rank != dst) continue;
      const int src = frames_in_flight_[e.frame()].header.src;
      auto it = first.find(src);
      if (it == first.end() || e.order < heap_[it->second].order) first[src] = i;
    }
    if (first.size() == 1) {
      best = first.begin()->second;
    } else {
      std::vector<std::string> labels;
      std::vector<std::size_t> index;
      for (const auto& [src, i] : first) {
        const FrameHeader& h = frames_in_flight_[heap_[i].frame()].header;
        labels.push_back("rank " + std::to_string(dst) + " gets rank " + std::to_string(src) + "'s frame (tag " +
                         std::to_string(h.tag) + ") first");
        index.push_back(i);
      }
      best = index[explorer_->choose(labels)];
    }
  }
  out = heap_[best];
  for (std::size_t i = 0; i < heap_.size(); ++i)
    if (i != best) queue_.push(heap_[i]);
  return true;
}

bool Simulator::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  if (running_) {
    throw Error(ErrorKind::kUsage, OpContext{},
                "a blocking wait() was called from inside a simulated rank; simulated ranks block with co_await");
  }
  running_ = true;
  struct Reset {
    bool& b;
    ~Reset() { b = false; }
  } reset{running_};
  while (!done()) {
    if (queue_.empty() && deadline) {
      now_ = std::max(now_, *deadline);  // virtual time passes even when nothing happens
      return false;
    }
    if (queue_.empty()) {
      throw Error(ErrorKind::kDeadlock, OpContext{},
                  "no event can run at t=" + std::to_string(now_) + "ns and the awaited op is not complete");
    }
    if (deadline && queue_.top().time > *deadline) {
      now_ = std::max(now_, *deadline);
      return false;
    }
    Event e;
    if (explorer_) {
      pop_explored(e);
    } else {
      e = queue_.pop();
      if (!queue_.empty()) prefetch(queue_.top());
      prefetch_ahead();
    }
    now_ = e.time;
    process(e);
    if (huge_pages_ && (events_ & 1023) == 0) huge_pages_->grew();
  }
  return true;
}

}  // namespace collie::sim
