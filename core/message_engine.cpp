#include "core/message_engine.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <utility>

#include "core/frame_check.h"
#include "core/transport_call.h"

namespace collie {

namespace {

struct ComputeAwaiter {
  Transport* t;
  std::uint64_t bytes;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    TransportCall call("schedule_after_compute()");
    t->schedule_after_compute(bytes, h);
  }
  void await_resume() const {
    if (TransportCall::current()) [[unlikely]] note_resumed_inside_call(t, "a received reduction's compute time");
    restore_scribbles(t);
  }
};

Spawned finish_later(Transport* t, std::uint64_t bytes, std::shared_ptr<WorkState> w) {
  co_await ComputeAwaiter{t, bytes};
  w->finish(nullptr);
}

}  // namespace

MessageEngine::MessageEngine(Transport& transport, std::size_t eager_threshold_bytes, bool scribble_completed_sends,
                             std::uint64_t first_send_id)
    : t_(transport), rank_(transport.rank()), eager_threshold_(eager_threshold_bytes), next_send_id_(first_send_id) {
  // Only host memory is scribbled (the core never loads device memory),
  // and only payloads that exist.
  if (scribble_completed_sends && transport.moves_payloads() && transport.memory_space() == MemorySpace::kHost)
    scribble_ = std::make_unique<SendScribble>(&transport);
}

MessageEngine::~MessageEngine() {
  // Notes against this transport die with it: another at the same address
  // must not inherit them.
  (void)take_resumptions_inside_calls(&t_);
}

std::shared_ptr<WorkState> MessageEngine::new_work(std::shared_ptr<const OpInfo> info) {
  auto w = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  w->executor = &t_;
  w->posted_at = t_.now();
  w->info = std::move(info);
  return w;
}

bool MessageEngine::matches(const RecvSpec& s, const FrameHeader& h) {
  return s.context == h.context && s.tag == h.tag && s.seq == h.fp.seq &&
         (s.src == kAnySource || s.src == h.src);
}

std::shared_ptr<WorkState> MessageEngine::send(const SendSpec& spec, std::shared_ptr<const OpInfo> info) {
  auto w = new_work(std::move(info));
  if (refuse_if_broken(w)) return w;
  FrameHeader h;
  h.src = rank_;
  h.dst = spec.dst;
  h.context = spec.context;
  h.group_digest = spec.group_digest;
  h.tag = spec.tag;
  h.dtype = spec.buf.dtype;
  h.count = spec.buf.count;
  h.fp = spec.fp;
  const std::size_t bytes = spec.buf.bytes();

  if (spec.dst == rank_) {
    // Local match: copy now, so the send completes at once whatever the size.
    h.kind = FrameKind::kEager;
    h.bytes = bytes;
    const StoredFrame copy = store(h, spec.buf.byte_data(), bytes);
    process_in_order(h, copy.bytes());
    w->finish(nullptr);
    return w;
  }

  if (odd_ && odd_->lost_peers.count(spec.dst)) {
    OpContext ctx = w->info ? w->info->context({spec.dst}) : OpContext{rank_, "send", "", -1, {spec.dst}};
    w->finish(std::make_exception_ptr(
        Error(ErrorKind::kTransport, ctx, "lost rank " + std::to_string(spec.dst) + ": " + odd_->lost_why[spec.dst])));
    return w;
  }
  h.channel_seq = channels_.take_out(spec.dst);
  const std::uint64_t id = next_send_id_++;
  PendingSend& ps = sends_.insert_last(id);
  ps.buf = spec.buf;
  ps.work = w;
  ps.keepalive = spec.keepalive;
  void* cookie = reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));
  if (bytes <= eager_threshold_) {
    h.kind = FrameKind::kEager;
    h.bytes = bytes;
    ps.header = SentHeader(h);
    post(h, {spec.buf.byte_data(), bytes}, cookie);
  } else {
    h.kind = FrameKind::kRts;
    h.bytes = 0;
    h.rendezvous_id = id;
    ps.header = SentHeader(h);
    ps.awaiting_cts = true;
    post(h, {}, nullptr);
  }
  return w;
}

std::shared_ptr<WorkState> MessageEngine::recv(const RecvSpec& spec, std::shared_ptr<const OpInfo> info) {
  auto w = new_work(std::move(info));
  if (refuse_if_broken(w)) return w;
  if (spec.src != kAnySource && odd_ && odd_->lost_peers.count(spec.src)) {
    bool already_here = false;  // a message it sent before it was lost can still be received
    for (const auto& f : unexpected_) already_here = already_here || matches(spec, f.header);
    if (!already_here) {
      OpContext ctx = w->info ? w->info->context({spec.src}) : OpContext{rank_, "recv", "", -1, {spec.src}};
      w->finish(std::make_exception_ptr(
          Error(ErrorKind::kTransport, ctx, "lost rank " + std::to_string(spec.src) + ": " + odd_->lost_why[spec.src])));
      return w;
    }
  }
  PostedRecv r{spec, w};
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (matches(spec, it->header)) {
      StoredFrame f = std::move(*it);
      unexpected_.erase(it);
      deliver(std::move(r), f.header, f.bytes());
      return w;
    }
  }
  posted_.push_back(std::move(r));
  return w;
}

namespace {

const char* frame_kind_text(FrameKind k) {
  switch (k) {
    case FrameKind::kEager: return "eager";
    case FrameKind::kRts: return "RTS";
    case FrameKind::kCts: return "CTS";
    case FrameKind::kData: return "data";
    case FrameKind::kNack: return "NACK";
  }
  return "unknown";
}

// "eager frame from rank 1 to rank 0 (context 2, tag 3, channel_seq 5,
// float32 x 4, 16 bytes, part of all_reduce(...) #1)": a frame as a
// transport's author looks for it.
std::string describe_frame(const FrameHeader& h) {
  std::string s = std::string(frame_kind_text(h.kind)) + " frame from rank " + std::to_string(h.src) + " to rank " +
                  std::to_string(h.dst) + " (context " + std::to_string(h.context) + ", tag " + std::to_string(h.tag);
  if (h.kind == FrameKind::kEager || h.kind == FrameKind::kRts) s += ", channel_seq " + std::to_string(h.channel_seq);
  if (h.kind != FrameKind::kEager) s += ", rendezvous " + std::to_string(h.rendezvous_id);
  s += ", " + describe_elements(h.dtype, h.count) + ", " + std::to_string(h.bytes) + " bytes";
  if (h.fp.op != CollectiveKind::kNone) s += ", part of " + describe_call(h.fp);
  return s + ")";
}

}  // namespace

void MessageEngine::contract_violation(const FrameHeader* h, const std::string& what, const char* contract) {
  if (broken_) return;
  OpContext ctx = h ? frame_context(*h) : OpContext{rank_, "", "", -1, {}};
  const Error e(ErrorKind::kTransport, ctx,
                std::string("the transport broke its contract (") + contract + "): " + what +
                    (h ? ": " + describe_frame(*h) : std::string()));
  rare().violation = e.what();
  broken_ = std::make_exception_ptr(e);
  fail_everything(broken_);
  // Sends already handed to the transport can no longer be trusted either.
  std::vector<std::shared_ptr<WorkState>> sending;
  for (auto& [id, ps] : sends_)
    if (ps.work && !ps.work->completed) sending.push_back(ps.work);
  sends_.clear();
  for (auto& w : sending) w->finish(broken_);
}

OpContext MessageEngine::frame_context(const FrameHeader& h) const {
  const OpInfo* info = nullptr;
  if (h.kind == FrameKind::kCts || h.kind == FrameKind::kNack) {
    if (auto it = sends_.find(h.rendezvous_id); it != sends_.end()) info = it->second.info().get();
  } else if (h.kind == FrameKind::kData) {
    if (auto it = inbound_.find({h.src, h.rendezvous_id}); it != inbound_.end()) info = it->second.info().get();
  }
  if (!info && h.fp.op != CollectiveKind::kNone) {
    if (auto it = active_.find({h.context, h.fp.seq}); it != active_.end()) info = it->second.info.get();
  }
  for (auto r = posted_.begin(); !info && r != posted_.end(); ++r)
    if (matches(r->spec, h)) info = r->info().get();
  if (info) return info->context({h.src});
  OpContext ctx{rank_, "", "", -1, {h.src}};
  if (h.fp.op != CollectiveKind::kNone) {
    ctx.op = collective_name(h.fp.op);
    ctx.seq = static_cast<std::int64_t>(h.fp.seq);
  }
  if (const KnownContext* c = known(h.context)) ctx.group = c->group->name;
  return ctx;
}

bool MessageEngine::clock_holds() {
  const Nanos now = t_.now();
  if (now >= clock_) {
    clock_ = now;
    return true;
  }
  contract_violation(nullptr, "the clock went back from t=" + std::to_string(clock_) + " ns to t=" + std::to_string(now) +
                                  " ns between two callbacks (core/executor.h: now() never goes back)");
  return false;
}

bool MessageEngine::called_inside_a_call(const char* callback) {
  if (const char* call = TransportCall::current()) [[unlikely]] {
    if (rare().deferred.empty())
      rare().deferred = std::string(callback) + " inside " + call +
                  " (core/transport.h: post_send returns at once, and every callback into the core comes later, "
                  "from inside run_until, never inside a call the core made)";
    return true;
  }
  settle();
  return false;
}

void MessageEngine::settle() {
  const bool deferred = rare_ && !rare_->deferred.empty();
  if (!deferred && !resumptions_inside_calls_noted()) return;
  if (deferred) {
    const std::string what = std::exchange(rare_->deferred, {});
    contract_violation(nullptr, what);
  }
  for (const std::string& r : take_resumptions_inside_calls(&t_)) contract_violation(nullptr, r, "core/executor.h");
}

bool MessageEngine::refuse_if_broken(const std::shared_ptr<WorkState>& w) {
  if (!broken_) return false;
  w->finish(broken_);
  return true;
}

void MessageEngine::on_frame(const FrameHeader& h, std::span<const std::byte> payload) {
  ++frames_received_;
  if (called_inside_a_call("on_frame")) return;
  if (broken_) return;  // after a violation nothing that arrives is trusted
  if (!clock_holds()) return;
  if (scribble_) scribble_->restore();
  if (auto bad = malformed(h, &payload)) return contract_violation(&h, *bad);
  if (scribble_ && read_after_completion(h, payload)) return;
  if (odd_ && told_lost(h.src))
    return contract_violation(&h, "a frame from rank " + std::to_string(h.src) +
                                      " after the transport reported it lost (on_peer_lost: " + odd_->lost_why[h.src] +
                                      "): a lost peer is lost for good, and nothing it sent arrives after the report");
  switch (h.kind) {
    case FrameKind::kEager:
    case FrameKind::kRts: {
      const std::uint64_t next = channels_.in(h.src);
      if (h.channel_seq != next) {
        if (h.channel_seq < next)
          return contract_violation(&h, "a frame delivered twice (channel_seq " + std::to_string(h.channel_seq) +
                                            " from rank " + std::to_string(h.src) + " was already delivered)");
        auto& early = odd().early;
        if (early[h.src].count(h.channel_seq))
          return contract_violation(&h, "a frame delivered twice (channel_seq " + std::to_string(h.channel_seq) +
                                            " from rank " + std::to_string(h.src) + " is already held for order)");
        early[h.src][h.channel_seq] = store(h, payload.data(), payload.size());
        return;
      }
      channels_.advance_in(h.src);
      process_in_order(h, payload);
      // Frames that were waiting for this one.
      if (!odd_ || odd_->early.empty()) return;
      auto& early = odd_->early;
      auto eit = early.find(h.src);
      if (eit == early.end()) return;
      auto& q = eit->second;
      while (!q.empty() && q.begin()->first == channels_.in(h.src)) {
        StoredFrame f = std::move(q.begin()->second);
        q.erase(q.begin());
        channels_.advance_in(h.src);
        process_in_order(f.header, f.bytes());
      }
      if (q.empty()) early.erase(h.src);
      return;
    }
    case FrameKind::kCts: {
      auto it = sends_.find(h.rendezvous_id);
      if (it == sends_.end() || !it->second.awaiting_cts || it->second.header.dst != h.src) {
        if (rare_ && rare_->retired_sends.erase(h.rendezvous_id)) return;  // the send ended first
        return contract_violation(&h, unanswered(h));
      }
      if (auto bad = echo_mismatch(h, it->second.header.frame(rank_))) return contract_violation(&h, "a CTS whose " + *bad);
      PendingSend& ps = it->second;
      ps.awaiting_cts = false;
      FrameHeader d = ps.header.frame(rank_);
      d.kind = FrameKind::kData;
      d.bytes = ps.buf.bytes();
      post(d, {ps.buf.byte_data(), d.bytes}, reinterpret_cast<void*>(static_cast<std::uintptr_t>(it->first)));
      return;
    }
    case FrameKind::kNack: {
      auto it = sends_.find(h.rendezvous_id);
      if (it == sends_.end() || !it->second.awaiting_cts || it->second.header.dst != h.src) {
        if (rare_ && rare_->retired_sends.erase(h.rendezvous_id)) return;  // the send ended first
        return contract_violation(&h, unanswered(h));
      }
      if (auto bad = echo_mismatch(h, it->second.header.frame(rank_))) return contract_violation(&h, "a NACK whose " + *bad);
      PendingSend ps = std::move(it->second);
      sends_.erase(it);
      std::string reason(reinterpret_cast<const char*>(payload.data()), payload.size());
      OpContext ctx = ps.info() ? ps.info()->context({h.src}) : OpContext{rank_, "send", "", -1, {h.src}};
      ps.work->finish(std::make_exception_ptr(
          Error(static_cast<ErrorKind>(h.tag), ctx, "rank " + std::to_string(h.src) + " refused the message: " + reason)));
      return;
    }
    case FrameKind::kData: {
      auto it = inbound_.find({h.src, h.rendezvous_id});
      if (it == inbound_.end()) {
        if (rare_ && rare_->retired_inbound.erase({h.src, h.rendezvous_id})) return;  // the receive ended first
        return contract_violation(&h, unanswered(h));
      }
      if (auto bad = data_mismatch(h, it->second)) return contract_violation(&h, *bad);
      PostedRecv r = std::move(it->second);
      inbound_.erase(it);
      apply_payload(r, h, payload);
      return;
    }
  }
}

FrameSink::Landing MessageEngine::landing_zone(const FrameHeader& h) {
  if (called_inside_a_call("landing_zone") || broken_) return {};
  if (scribble_) scribble_->restore();
  // Only a frame on_frame() would take lands: the rest is refused there.
  if (h.kind != FrameKind::kData || malformed(h, nullptr)) return {};
  auto it = inbound_.find({h.src, h.rendezvous_id});
  if (it == inbound_.end() || data_mismatch(h, it->second)) return {};
  const RecvSpec& s = it->second.spec;
  if (s.buf.space != t_.memory_space() || !s.buf.data || s.buf.bytes() != h.bytes) return {};
  return {{s.buf.byte_data(), h.bytes}, s.reduce, s.buf.dtype, s.op};
}

void MessageEngine::post(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  FrameHeader sealed = h;
  seal(sealed);
  TransportCall call("post_send()");
  t_.post_send(sealed, payload, cookie);
}

std::optional<std::string> MessageEngine::malformed(const FrameHeader& h,
                                                    const std::span<const std::byte>* payload) const {
  if (auto d = inspect(h)) {
    if (d->field < 0)
      return std::string("a header changed in transit: its check words match none of its fields changed alone "
                         "(more than one changed, or the words themselves)");
    return "a header changed in transit: its " + d->name + " is " + d->is + " but the sender wrote " + d->was;
  }
  // Sealed by something that is not a core: codes no sender writes.
  if (auto f = out_of_range_field(h)) return "a header whose " + *f + " holds no valid code";
  if (h.dst != rank_) return "a frame whose dst is rank " + std::to_string(h.dst) + ", delivered to rank " + std::to_string(rank_);
  if (h.src < 0 || h.src >= t_.world_size())
    return "a frame whose src is rank " + std::to_string(h.src) + ", outside the world of " +
           std::to_string(t_.world_size());
  if (h.src == rank_) return "a frame whose src is the receiving rank itself (its frames to itself never leave it)";
  if (payload && !payload->empty() && !t_.moves_payloads())
    return "a payload of " + std::to_string(payload->size()) +
           " bytes from a transport whose moves_payloads() says it moves none (its frames arrive empty)";
  if (payload && payload->size() != h.bytes && !(payload->empty() && !t_.moves_payloads()))
    return "a payload of " + std::to_string(payload->size()) + " bytes for a header that says " +
           std::to_string(h.bytes);
  const std::uint64_t size = dtype_size(h.dtype);
  switch (h.kind) {
    case FrameKind::kEager:
      if (h.rendezvous_id != 0)
        return "an eager frame whose rendezvous_id is " + std::to_string(h.rendezvous_id) +
               " (only a rendezvous's frames name one; eager frames carry 0)";
      if (h.count > h.bytes / size || h.count * size != h.bytes)
        return std::string("an eager frame whose bytes is ") + std::to_string(h.bytes) + " but whose count (" +
               std::to_string(h.count) + ") of " + std::string(dtype_name(h.dtype)) + " makes " +
               std::to_string(h.count * size);
      break;
    case FrameKind::kData:  // checked against the RTS it answers (data_mismatch())
      break;
    case FrameKind::kRts:
      if (h.bytes != 0) return "an RTS whose bytes is " + std::to_string(h.bytes) + " (an RTS carries no payload)";
      if (h.rendezvous_id == 0) return std::string("an RTS whose rendezvous_id is 0 (a rendezvous is never 0)");
      if (h.count == 0) return std::string("an RTS whose count is 0 (a rendezvous moves at least one element)");
      if (inbound_.count({h.src, h.rendezvous_id}))
        return "an RTS whose rendezvous_id " + std::to_string(h.rendezvous_id) + " is already in flight from rank " +
               std::to_string(h.src);
      break;
    case FrameKind::kCts:
      if (h.bytes != 0) return "a CTS whose bytes is " + std::to_string(h.bytes) + " (a CTS carries no payload)";
      break;
    case FrameKind::kNack: {
      const auto why = static_cast<ErrorKind>(h.tag);
      if (why != ErrorKind::kGroupMismatch && why != ErrorKind::kDTypeMismatch && why != ErrorKind::kSizeMismatch)
        return "a NACK whose tag is " + std::to_string(h.tag) +
               ", which names no refusal (a group, dtype or size mismatch)";
      if (h.bytes == 0) return std::string("a NACK whose bytes is 0 (it carries the refusal's reason)");
      break;
    }
  }
  return std::nullopt;  // the context's part: check_context(), as the frame is matched
}

std::optional<std::string> MessageEngine::off_context(const FrameHeader& h, const KnownContext& c) const {
  auto where = [&](const char* carries) {
    return " on context " + std::to_string(h.context) + " (" + c.group->name + ", " + carries + ")";
  };
  if (c.collective) {
    if (h.fp.op == CollectiveKind::kNone || h.fp.seq == 0)
      return "a frame" + where("collectives") + " whose fingerprint names no call (fingerprint.op " +
             collective_name(h.fp.op) + ", fingerprint.seq " + std::to_string(h.fp.seq) + ")";
    if (h.dtype != h.fp.dtype)
      return "a frame" + where("collectives") + " whose dtype is " + std::string(dtype_name(h.dtype)) +
             " but its call's (fingerprint.dtype) is " + std::string(dtype_name(h.fp.dtype));
  } else if (!(h.fp == Fingerprint{})) {
    return "a frame" + where("point-to-point") + " whose fingerprint names a call (" + *fingerprint_difference(h.fp) +
           "; point-to-point frames carry an empty fingerprint)";
  }
  // A group with other members under this context is the program's error
  // (groups created in different orders): check_context() names it.
  const auto& members = c.group->members;
  if (members && static_cast<int>(members->size()) < t_.world_size() &&
      !std::binary_search(members->begin(), members->end(), h.src))
    return "a frame from rank " + std::to_string(h.src) + where(c.collective ? "collectives" : "point-to-point") +
           ", a group rank " + std::to_string(h.src) + " is not a member of";
  return std::nullopt;
}

std::optional<std::string> MessageEngine::data_mismatch(const FrameHeader& h, const InboundRecv& r) const {
  if (auto bad = echo_mismatch(h, rts(r, h.src, h.rendezvous_id))) return "a data frame whose " + *bad;
  // The RTS's count and dtype matched the receive's buffer.
  if (h.bytes != r.spec.buf.bytes())
    return "a data frame whose bytes is " + std::to_string(h.bytes) + " but whose count (" + std::to_string(h.count) +
           ") of " + std::string(dtype_name(h.dtype)) + " makes " + std::to_string(r.spec.buf.bytes());
  return std::nullopt;
}

FrameHeader MessageEngine::SentHeader::frame(int src) const {
  return FrameHeader{.kind = kind, .src = src, .dst = dst, .context = context, .group_digest = group_digest,
                     .tag = tag, .channel_seq = channel_seq, .rendezvous_id = rendezvous_id, .dtype = dtype,
                     .count = count, .bytes = 0, .fp = fp, .check = {}};
}

FrameHeader MessageEngine::rts(const InboundRecv& r, int src, std::uint64_t rendezvous_id) const {
  return FrameHeader{.kind = FrameKind::kRts, .src = src, .dst = rank_, .context = r.spec.context,
                     .group_digest = r.spec.group_digest, .tag = r.spec.tag, .channel_seq = r.channel_seq,
                     .rendezvous_id = rendezvous_id, .dtype = r.spec.buf.dtype, .count = r.spec.buf.count,
                     .bytes = 0, .fp = r.fp, .check = {}};
}

std::string MessageEngine::unanswered(const FrameHeader& h) const {
  const bool data = h.kind == FrameKind::kData;
  std::string out = std::string("a ") + frame_kind_text(h.kind) + " frame for rendezvous " +
                    std::to_string(h.rendezvous_id) + " from rank " + std::to_string(h.src) + ", which " +
                    (data ? "this rank never cleared to send (no CTS), or already received"
                          : "no send of this rank to rank " + std::to_string(h.src) + " awaits (never posted, or already answered)");
  // The rendezvous it answers but for one field, when there is exactly one.
  std::vector<std::string> near;
  auto consider = [&](const FrameHeader& rts, int peer) {
    FrameHeader as_if = h;
    as_if.rendezvous_id = rts.rendezvous_id;
    as_if.src = peer;
    const bool same_id = h.rendezvous_id == rts.rendezvous_id, same_peer = h.src == peer;
    if (same_id == same_peer || echo_mismatch(as_if, rts)) return;  // not one field away
    near.push_back(same_id ? "its src is rank " + std::to_string(h.src) + " but the RTS " +
                                 (data ? "came from" : "went to") + " rank " + std::to_string(peer)
                           : "its rendezvous_id is " + std::to_string(h.rendezvous_id) +
                                 " but the RTS it otherwise answers is rendezvous " + std::to_string(rts.rendezvous_id));
  };
  if (data) {
    for (const auto& [key, r] : inbound_) consider(rts(r, key.first, key.second), key.first);
  } else {
    for (const auto& [id, ps] : sends_)
      if (ps.awaiting_cts) consider(ps.header.frame(rank_), ps.header.dst);
  }
  if (near.size() == 1) out += ": " + near.front();
  return out;
}

void MessageEngine::on_send_complete(void* cookie) {
  if (called_inside_a_call("on_send_complete") || broken_ || !clock_holds()) return;
  const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(cookie));
  auto it = sends_.find(id);
  if (it == sends_.end() || it->second.awaiting_cts)
    return contract_violation(nullptr, "on_send_complete for cookie " + std::to_string(id) +
                                           ", which is not an outstanding send (completed twice, or never posted)");
  PendingSend done = std::move(it->second);
  sends_.erase(it);
  // Scribbled before the op finishes: a transport that resumes its rank
  // inside finish() is caught (core/transport_call.h), and the resumption
  // restores the bytes first. A send that already ended (failed, aborted),
  // or part of a collective call that did, is its program's no more: its
  // buffer may be gone.
  const bool live = !done.work->completed && (done.header.fp.op == CollectiveKind::kNone ||
                                              active_.count({done.header.context, done.header.fp.seq}) != 0);
  if (scribble_ && live) scribble_completed(done);
  done.work->finish(nullptr);
}

void MessageEngine::scribble_completed(const PendingSend& ps) {
  if (ps.buf.space != MemorySpace::kHost || !ps.buf.data || ps.buf.bytes() == 0) return;
  std::byte* const begin = ps.buf.byte_data();
  std::byte* const end = begin + ps.buf.bytes();
  // What of [begin, end) the rank's other sends may still read and its
  // receives may still write, in address order.
  std::vector<std::pair<std::byte*, std::byte*>> held;
  auto hold = [&](const TensorView& v) {
    if (v.space != MemorySpace::kHost || !v.data) return;
    std::byte* b = std::max(begin, v.byte_data());
    std::byte* e = std::min(end, v.byte_data() + v.bytes());
    if (b < e) held.emplace_back(b, e);
  };
  for (const auto& [id, other] : sends_) hold(other.buf);
  for (const PostedRecv& r : posted_) hold(r.spec.buf);
  for (const auto& [key, r] : inbound_) hold(r.spec.buf);
  std::sort(held.begin(), held.end());
  std::byte* from = begin;
  for (const auto& [b, e] : held) {
    if (from < b) scribble_->scribble({from, b}, ps.keepalive);
    from = std::max(from, e);
  }
  if (from < end) scribble_->scribble({from, end}, ps.keepalive);
}

bool MessageEngine::read_after_completion(const FrameHeader& h, std::span<const std::byte> payload) {
  if (!holds_scribble(payload)) return false;  // (an RTS or CTS carries none)
  contract_violation(&h, "a payload holding the pattern collie writes over a completed send's buffer: rank " +
                             std::to_string(h.src) +
                             "'s transport read the send's buffer after on_send_complete() (a send's payload is "
                             "valid until its completion, not after; on checking runs the core overwrites a "
                             "completed send's buffer until its rank runs again, core/send_scribble.h)");
  return true;
}

void MessageEngine::on_peer_lost(int peer, const std::string& why, bool clean) {
  if (called_inside_a_call("on_peer_lost")) return;
  if (broken_) return;
  if (peer == rank_ || peer < 0 || peer >= t_.world_size())
    return contract_violation(nullptr, "on_peer_lost for rank " + std::to_string(peer) + " (\"" + why + "\"): " +
                                           (peer == rank_ ? "the reporting rank itself; only a peer can be lost"
                                                          : "outside the world of " + std::to_string(t_.world_size())));
  if (scribble_) scribble_->restore();
  if (!clean) odd().lost_peers.insert(peer);
  odd().lost_why[peer] = why;
  auto error_for = [&](const std::shared_ptr<const OpInfo>& info) {
    OpContext ctx = info ? info->context({peer}) : OpContext{rank_, "", "", -1, {peer}};
    return std::make_exception_ptr(Error(ErrorKind::kTransport, ctx, "lost rank " + std::to_string(peer) + ": " + why));
  };
  // Collectives of a group the peer belongs to (or with anything
  // outstanding on it) fail as a whole: they cannot complete correctly.
  std::set<std::pair<std::uint32_t, std::uint64_t>> calls;
  for (const Wait& w : waits())
    if (w.peer == peer && w.seq != 0) calls.insert({w.context, w.seq});
  if (!clean)
    for (const auto& [key, a] : active_)
      if (a.members && std::binary_search(a.members->begin(), a.members->end(), peer)) calls.insert(key);
  for (const auto& [ctx, seq] : calls) {
    auto it = active_.find({ctx, seq});
    fail_collective(ctx, seq, error_for(it != active_.end() ? it->second.info : nullptr));
  }
  std::vector<std::pair<std::shared_ptr<WorkState>, std::exception_ptr>> failed;
  for (auto it = posted_.begin(); it != posted_.end();) {
    if (it->spec.src == peer) {
      failed.emplace_back(it->work, error_for(it->info()));
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    if (it->first.first == peer) {
      failed.emplace_back(it->second.work, error_for(it->second.info()));
      retire_inbound(it->first);
      it = inbound_.erase(it);
    } else {
      ++it;
    }
  }
  // A send still waiting for its CTS goes. One on the wire stays until its
  // completion: the transport may still read its buffer, and it may still
  // complete it (exactly once) or, the peer being gone, never.
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->second.header.dst != peer) {
      ++it;
      continue;
    }
    failed.emplace_back(it->second.work, error_for(it->second.info()));
    if (it->second.awaiting_cts) {
      retire_send(it->first);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [w, e] : failed) w->finish(e);
}

void MessageEngine::process_in_order(const FrameHeader& h, std::span<const std::byte> payload) {
  check_context(h);
  if (broken_) return;
  if (h.fp.op != CollectiveKind::kNone) check_collective(h);
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (matches(it->spec, h)) {
      PostedRecv r = std::move(*it);
      posted_.erase(it);
      deliver(std::move(r), h, payload);
      return;
    }
  }
  unexpected_.push_back(h.kind == FrameKind::kEager ? store(h, payload.data(), payload.size())
                                                    : StoredFrame{h, nullptr, 0});
}

MessageEngine::StoredFrame MessageEngine::store(const FrameHeader& h, const std::byte* data, std::size_t size) {
  if (size == 0 || !t_.moves_payloads()) return StoredFrame{h, nullptr, 0};
  StoredFrame f{h, nullptr, size};
  {
    TransportCall call("allocate()");
    f.payload = t_.allocate(size);
  }
  if (std::string fault = allocation_fault(t_, f.payload.get(), size); !fault.empty()) {
    contract_violation(&h, fault);
    return StoredFrame{h, nullptr, 0};
  }
  TransportCall call("copy()");
  t_.copy(f.payload.get(), data, size);
  return f;
}

std::string MessageEngine::validate(const PostedRecv& r, const FrameHeader& h, ErrorKind* kind) const {
  if (h.group_digest != r.spec.group_digest) {
    *kind = ErrorKind::kGroupMismatch;
    return "rank " + std::to_string(h.src) + " sent on a group with different members under the same context " +
           std::to_string(h.context) + " (groups created in a different order on different ranks?)";
  }
  if (h.dtype != r.spec.buf.dtype || h.count != r.spec.buf.count) {
    *kind = h.dtype != r.spec.buf.dtype ? ErrorKind::kDTypeMismatch : ErrorKind::kSizeMismatch;
    std::ostringstream os;
    os << "message from rank " << h.src << " (tag " << h.tag << ") is " << describe_elements(h.dtype, h.count)
       << " but the receive buffer is " << describe_elements(r.spec.buf.dtype, r.spec.buf.count);
    return os.str();
  }
  return {};
}

void MessageEngine::deliver(PostedRecv r, const FrameHeader& h, std::span<const std::byte> payload) {
  ErrorKind kind{};
  std::string err = validate(r, h, &kind);
  if (!err.empty()) {
    OpContext ctx = r.info() ? r.info()->context({h.src}) : OpContext{rank_, "recv", "", -1, {h.src}};
    r.work->source = h.src;
    if (h.kind == FrameKind::kRts) {
      FrameHeader about = h;
      about.tag = static_cast<std::int32_t>(kind);
      send_control(FrameKind::kNack, about, err);
    }
    r.work->finish(std::make_exception_ptr(Error(kind, ctx, err)));
    return;
  }
  r.work->source = h.src;
  if (h.kind == FrameKind::kRts) {
    const std::pair<int, std::uint64_t> key{h.src, h.rendezvous_id};
    inbound_.emplace(key, InboundRecv{std::move(r), h.channel_seq, h.fp});
    send_control(FrameKind::kCts, h);
    return;
  }
  apply_payload(r, h, payload);
}

void MessageEngine::apply_payload(PostedRecv& r, const FrameHeader& h, std::span<const std::byte> payload) {
  (void)h;
  const std::size_t bytes = r.spec.buf.bytes();
  // A landed payload (landing_zone()) is already in place, reduced or copied.
  const bool landed = payload.data() == r.spec.buf.byte_data();
  // A transport that moves no payloads hands none over (its tensors have
  // no memory): nothing to copy or combine, only the time it costs.
  const bool arrived = payload.data() != nullptr;
  if (r.spec.reduce) {
    if (bytes && !landed && arrived) {
      TransportCall call("reduce()");
      t_.reduce(r.spec.buf.data, payload.data(), r.spec.buf.count, r.spec.buf.dtype, r.spec.op);
    }
    finish_after_compute(r.work, bytes);
  } else {
    if (bytes && !landed && arrived) {
      TransportCall call("copy()");
      t_.copy(r.spec.buf.data, payload.data(), bytes);
    }
    r.work->finish(nullptr);
  }
}

void MessageEngine::finish_after_compute(std::shared_ptr<WorkState> w, std::uint64_t bytes) {
  if (bytes == 0 || !t_.charges_compute_time()) {
    w->finish(nullptr);
    return;
  }
  spawned_.spawn(finish_later(&t_, bytes, std::move(w)));
}

void MessageEngine::send_control(FrameKind kind, const FrameHeader& about, std::string reason) {
  FrameHeader c = about;  // echoes the RTS (core/frame.h)
  c.kind = kind;
  c.src = rank_;
  c.dst = about.src;
  c.bytes = 0;
  if (kind == FrameKind::kNack) {
    // The reason must outlive the send: keep it until completion.
    auto text = std::make_shared<std::string>(std::move(reason));
    c.bytes = text->size();
    const std::uint64_t id = next_send_id_++;
    PendingSend& ps = sends_.insert_last(id);
    ps.header = SentHeader(c);
    ps.buf = TensorView{text->data(), DType::kUInt8, text->size(), MemorySpace::kHost};
    ps.work = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
    ps.work->executor = &t_;
    ps.keepalive = text;
    post(c, {reinterpret_cast<const std::byte*>(text->data()), text->size()},
                 reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)));
    return;
  }
  post(c, {}, nullptr);
}

void MessageEngine::begin_collective(std::uint32_t context, std::uint64_t group_digest, const Fingerprint& fp,
                                     std::shared_ptr<WorkState> outer, std::shared_ptr<const OpInfo> info,
                                     std::shared_ptr<const std::vector<int>> members) {
  // Lost peers are few; members may be the whole world (sorted).
  if (odd_) {
    for (int m : odd_->lost_peers) {
      if (!members || !std::binary_search(members->begin(), members->end(), m)) continue;
      OpContext ctx = info ? info->context({m}) : OpContext{rank_, "", "", -1, {m}};
      outer->finish(std::make_exception_ptr(
          Error(ErrorKind::kTransport, ctx, "lost rank " + std::to_string(m) + ": " + odd_->lost_why[m])));
      return;
    }
  }
  ActiveCollective& a = active_[{context, fp.seq}];
  a.members = std::move(members);
  a.fp = fp;
  a.group_digest = group_digest;
  a.outer = std::move(outer);
  a.info = std::move(info);
  for (const StoredFrame& f : unexpected_) {
    if (f.header.context == context && f.header.fp.seq == fp.seq && f.header.fp.op != CollectiveKind::kNone) {
      if (!check_collective(f.header)) return;
    }
  }
}

void MessageEngine::end_collective(std::uint32_t context, std::uint64_t seq) { active_.erase({context, seq}); }

namespace {
// Where `context` is or would be in a list sorted by context.
template <typename List>
auto context_position(List& contexts, std::uint32_t context) {
  return std::lower_bound(contexts.begin(), contexts.end(), context,
                          [](const auto& k, std::uint32_t c) { return k.context < c; });
}
}  // namespace

const MessageEngine::KnownContext* MessageEngine::known(std::uint32_t context) const {
  auto it = context_position(contexts_, context);
  return it != contexts_.end() && it->context == context ? &*it : nullptr;
}

void MessageEngine::register_context(std::uint32_t context, std::shared_ptr<const GroupIdentity> group,
                                     bool collective) {
  KnownContext k{context, collective, std::move(group)};
  auto it = context_position(contexts_, context);
  if (it != contexts_.end() && it->context == context) *it = std::move(k);
  else contexts_.insert(it, std::move(k));
  // Frames that came before the context was known are checked now.
  for (const StoredFrame& f : unexpected_) {
    if (f.header.context == context && !check_context(f.header)) return;
  }
}

bool MessageEngine::check_context(const FrameHeader& h) {
  const KnownContext* k = known(h.context);
  if (!k) return true;
  if (k->group->digest == h.group_digest) {
    // What the frame says of its own context is the transport's to keep.
    if (auto bad = off_context(h, *k)) {
      contract_violation(&h, *bad);
      return false;
    }
    return true;
  }
  OpContext ctx{rank_, "", k->group->name, -1, {h.src}};
  auto err = std::make_exception_ptr(Error(
      ErrorKind::kGroupMismatch, ctx,
      "rank " + std::to_string(h.src) + " sent " +
          (h.fp.op == CollectiveKind::kNone ? std::string("a point-to-point message") : "part of " + describe_call(h.fp)) +
          " on context " + std::to_string(h.context) + ", which rank " + std::to_string(rank_) + " assigned to " +
          k->group->name +
          ", but rank " + std::to_string(h.src) +
          "'s group has other members: the ranks created their groups in different orders (every rank must call "
          "new_group for every group, in the same order)"));
  fail_everything(err);
  return false;
}

void MessageEngine::fail_everything(std::exception_ptr err) {
  std::vector<std::pair<std::uint32_t, std::uint64_t>> keys;
  for (const auto& [k, a] : active_) keys.push_back(k);
  for (const auto& k : keys) fail_collective(k.first, k.second, err);
  auto posted = std::move(posted_);
  posted_.clear();
  for (PostedRecv& r : posted) r.work->finish(err);
  auto inbound = std::move(inbound_);
  inbound_.clear();
  for (auto& [k, r] : inbound) retire_inbound(k);
  for (auto& [k, r] : inbound) r.work->finish(err);
  std::vector<std::shared_ptr<WorkState>> waiting;
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->second.awaiting_cts && it->second.work) {
      waiting.push_back(it->second.work);
      retire_send(it->first);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& w : waiting) w->finish(err);
}

std::vector<MessageEngine::RunningCollective> MessageEngine::running_collectives() const {
  std::vector<RunningCollective> out;
  for (const auto& [k, a] : active_) out.push_back(RunningCollective{k.first, a.info ? a.info->group : "", a.fp});
  return out;
}

bool MessageEngine::check_collective(const FrameHeader& h) {
  auto it = active_.find({h.context, h.fp.seq});
  if (it == active_.end()) return true;
  const ActiveCollective& a = it->second;
  if (a.group_digest != h.group_digest) {
    auto err = std::make_exception_ptr(
        Error(ErrorKind::kGroupMismatch, a.info->context({h.src}),
              "rank " + std::to_string(h.src) + " ran " + describe_call(h.fp) +
                  " on a group with different members under the same context (groups created in a different "
                  "order on different ranks?)"));
    fail_collective(h.context, h.fp.seq, err);
    return false;
  }
  if (a.fp == h.fp) return true;
  auto err = std::make_exception_ptr(Error(ErrorKind::kCollectiveMismatch, a.info->context({h.src}),
                                           "rank " + std::to_string(h.src) + " called " + describe_call(h.fp) +
                                               " but rank " + std::to_string(rank_) + " called " +
                                               describe_call(a.fp)));
  fail_collective(h.context, h.fp.seq, err);
  return false;
}

std::size_t MessageEngine::abort_all(std::exception_ptr err) {
  std::vector<std::shared_ptr<WorkState>> works;
  for (auto& [key, a] : active_)
    if (a.outer) works.push_back(a.outer);
  active_.clear();
  for (auto& p : posted_) works.push_back(p.work);
  posted_.clear();
  for (auto& [key, r] : inbound_) {
    works.push_back(r.work);
    retire_inbound(key);
  }
  inbound_.clear();
  // Sends on the wire stay until the transport completes them (it may still
  // read their buffers); their ops fail now like the rest.
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->second.work) works.push_back(it->second.work);
    if (it->second.awaiting_cts) {
      retire_send(it->first);
      it = sends_.erase(it);
    } else {
      ++it;
    }
  }
  std::size_t failed = 0;
  for (auto& w : works) {
    if (!w || w->completed) continue;
    ++failed;
    w->finish(err);
  }
  return failed;
}

void MessageEngine::fail_collective(std::uint32_t context, std::uint64_t seq, std::exception_ptr err) {
  // Every structure is settled before an op finishes: finishing resumes
  // coroutines, which may post or abort ops.
  std::vector<std::shared_ptr<WorkState>> failed;
  auto it = active_.find({context, seq});
  if (it != active_.end()) {
    if (it->second.outer) failed.push_back(it->second.outer);
    active_.erase(it);
  }
  // Unblock the algorithm: every sub-operation of the call fails too.
  for (auto p = posted_.begin(); p != posted_.end();) {
    if (p->spec.context == context && p->spec.seq == seq) {
      failed.push_back(p->work);
      p = posted_.erase(p);
    } else {
      ++p;
    }
  }
  for (auto p = inbound_.begin(); p != inbound_.end();) {
    if (p->second.spec.context == context && p->second.spec.seq == seq) {
      failed.push_back(p->second.work);
      retire_inbound(p->first);
      p = inbound_.erase(p);
    } else {
      ++p;
    }
  }
  for (auto p = sends_.begin(); p != sends_.end();) {
    if (p->second.header.context == context && p->second.header.fp.seq == seq && p->second.awaiting_cts) {
      failed.push_back(p->second.work);
      retire_send(p->first);
      p = sends_.erase(p);
    } else {
      ++p;
    }
  }
  for (auto& w : failed) w->finish(err);
}

namespace {
std::string who(const std::shared_ptr<const OpInfo>& info) {
  if (!info) return std::string("internal");
  std::string s = info->op;
  if (info->seq >= 0) s += " #" + std::to_string(info->seq);
  if (!info->group.empty()) s += " on " + info->group;
  if (info->step_phase) s += " at step '" + info->step() + "'";
  return s;
}
}  // namespace

std::vector<MessageEngine::Wait> MessageEngine::waits() const {
  std::vector<Wait> out;
  for (const PostedRecv& r : posted_)
    out.push_back(Wait{false, r.spec.src, r.spec.tag, r.spec.context, r.spec.seq, r.spec.buf.dtype, r.spec.buf.count,
                       r.work->posted_at, r.info(), r.work});
  for (const auto& [key, r] : inbound_)
    out.push_back(Wait{false, key.first, r.spec.tag, r.spec.context, r.spec.seq, r.spec.buf.dtype, r.spec.buf.count,
                       r.work->posted_at, r.info(), r.work});
  for (const auto& [id, s] : sends_) {
    if (!s.work || !s.info() || !s.awaiting_cts) continue;
    out.push_back(Wait{true, s.header.dst, s.header.tag, s.header.context, s.header.fp.seq, s.buf.dtype, s.buf.count,
                       s.work->posted_at, s.info(), s.work});
  }
  return out;
}

std::vector<MessageEngine::HeldForOrder> MessageEngine::held_for_order() const {
  std::vector<HeldForOrder> out;
  if (!odd_) return out;
  for (const auto& [src, q] : odd_->early) {
    if (q.empty()) continue;
    HeldForOrder h;
    h.src = src;
    h.missing_seq = channels_.in(src);
    for (const auto& [seq, f] : q) h.held.push_back(f.header);
    out.push_back(std::move(h));
  }
  std::sort(out.begin(), out.end(), [](const HeldForOrder& a, const HeldForOrder& b) { return a.src < b.src; });
  return out;
}

std::vector<MessageEngine::Unmatched> MessageEngine::unmatched() const {
  std::vector<Unmatched> out;
  for (const StoredFrame& f : unexpected_) out.push_back(Unmatched{f.header});
  return out;
}

namespace {
// "rank 2 (tag 5, float32 x 4 (16 bytes))" or "rank 2 to receive (...)".
std::string wait_line(const MessageEngine::Wait& w) {
  const std::string who = w.peer == kAnySource ? std::string("any rank") : "rank " + std::to_string(w.peer);
  return who + (w.is_send ? " to receive" : "") + " (tag " + std::to_string(w.tag) + ", " +
         describe_elements(w.dtype, w.count) + ")";
}
}  // namespace

std::vector<std::string> MessageEngine::describe_waits(std::uint32_t context, std::uint64_t seq,
                                                       std::vector<int>* peers) const {
  return describe_waits_if([&](const Wait& w) { return w.context == context && w.seq == seq; }, peers);
}

std::vector<std::string> MessageEngine::describe_waits(const std::shared_ptr<WorkState>& work,
                                                       std::vector<int>* peers) const {
  return describe_waits_if([&](const Wait& w) { return w.work == work; }, peers);
}

std::vector<std::string> MessageEngine::describe_waits_if(const std::function<bool(const Wait&)>& pick,
                                                          std::vector<int>* peers) const {
  std::vector<std::string> out;
  for (const Wait& w : waits()) {
    if (!pick(w)) continue;
    out.push_back(wait_line(w));
    if (peers && w.peer != kAnySource) peers->push_back(w.peer);
  }
  return out;
}

void MessageEngine::abort_p2p(const std::shared_ptr<WorkState>& work, std::exception_ptr err) {
  std::erase_if(posted_, [&](const PostedRecv& r) { return r.work == work; });
  for (auto it = inbound_.begin(); it != inbound_.end();) {
    if (it->second.work != work) {
      ++it;
      continue;
    }
    retire_inbound(it->first);
    it = inbound_.erase(it);
  }
  // A send whose data is already on the wire is left to finish: the transport
  // may still read its buffer. Only one still waiting for its receiver goes.
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->second.work != work || !it->second.awaiting_cts) {
      ++it;
      continue;
    }
    retire_send(it->first);
    it = sends_.erase(it);
  }
  work->finish(std::move(err));
}

std::vector<std::string> MessageEngine::describe_pending() const {
  std::vector<std::string> out;
  for (const PostedRecv& r : posted_) {
    std::ostringstream os;
    os << who(r.info()) << ": waiting for a message from "
       << (r.spec.src == kAnySource ? std::string("any rank") : "rank " + std::to_string(r.spec.src)) << " (tag "
       << r.spec.tag << ", " << describe_elements(r.spec.buf.dtype, r.spec.buf.count) << ") since t="
       << r.work->posted_at << "ns";
    out.push_back(os.str());
  }
  for (const auto& [key, r] : inbound_) {
    std::ostringstream os;
    os << who(r.info()) << ": waiting for the data of a rendezvous from rank " << key.first << " (tag " << r.spec.tag
       << ")";
    out.push_back(os.str());
  }
  for (const auto& [id, s] : sends_) {
    if (!s.work || !s.info()) continue;
    std::ostringstream os;
    os << who(s.info()) << ": send to rank " << s.header.dst << " (tag " << s.header.tag << ", "
       << describe_elements(s.buf.dtype, s.buf.count) << ") "
       << (s.awaiting_cts ? "waiting for the receiver to post a matching receive (rendezvous)" : "in flight")
       << " since t=" << s.work->posted_at << "ns";
    out.push_back(os.str());
  }
  return out;
}

bool MessageEngine::owes_completions() const {
  for (const auto& [id, s] : sends_)
    if (!s.awaiting_cts && !told_lost(s.header.dst)) return true;
  return false;
}

std::vector<std::string> MessageEngine::owed_completions() const {
  std::vector<std::string> out;
  for (const auto& [id, s] : sends_) {
    if (s.awaiting_cts || told_lost(s.header.dst)) continue;
    std::ostringstream os;
    os << "rank " << rank_ << "'s ";
    if (s.header.kind == FrameKind::kNack) {
      os << "NACK (its refusal of rendezvous " << s.header.rendezvous_id << ") to rank " << s.header.dst << " (cookie "
         << id << ")";
    } else {
      os << (s.header.kind == FrameKind::kRts ? "data frame of rendezvous " + std::to_string(s.header.rendezvous_id)
                                              : std::string("eager frame"))
         << " to rank " << s.header.dst << " (cookie " << id << ", " << who(s.info()) << ", tag " << s.header.tag
         << ", posted at t=" << s.work->posted_at << " ns)";
    }
    out.push_back(os.str());
  }
  return out;
}

std::vector<std::string> MessageEngine::describe_unexpected() const {
  std::vector<std::string> out;
  for (const StoredFrame& f : unexpected_) {
    std::ostringstream os;
    os << (f.header.kind == FrameKind::kRts ? "rendezvous request" : "message") << " from rank " << f.header.src
       << " (tag " << f.header.tag << ", " << describe_elements(f.header.dtype, f.header.count);
    if (f.header.fp.op != CollectiveKind::kNone) os << ", part of " << describe_call(f.header.fp);
    os << ") was never received";
    out.push_back(os.str());
  }
  return out;
}

}  // namespace collie
