#include "backends/cuda/cuda_transport.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"

namespace collie::cuda {

namespace {

// One rank's Transport: its stream, its sink, and the world that drives it.
class RankTransport final : public Transport {
 public:
  RankTransport(CudaWorld::Impl& world, int rank) : w_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override;
  void attach(FrameSink* sink) override { sink_ = sink; }
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override;
  void schedule(std::coroutine_handle<> h) override;
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<> h) override { schedule(h); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override;
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override;
  Nanos now() const override;
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) override;
  void finish_average(void* dst, std::size_t count, DType dtype, int divisor) override;
  std::shared_ptr<std::byte> allocate(std::size_t bytes) override;
  FrameSink* sink() const { return sink_; }

 private:
  CudaWorld::Impl& w_;
  int rank_;
  FrameSink* sink_ = nullptr;
};

}  // namespace

class CudaWorld::Impl {
 public:
  Impl(std::unique_ptr<DeviceRuntime> runtime, const CudaWorldOptions& o) : rt_(std::move(runtime)), bug_(o.bug) {
    if (o.world_size < 1)
      throw Error(ErrorKind::kInvalidArgument, OpContext{}, "cuda: world size " + std::to_string(o.world_size));
    const int n = o.world_size;
    devices_ = rt_->device_count();
    if (devices_ < 1) throw Error(ErrorKind::kTransport, OpContext{}, "cuda: the " + rt_->name() + " runtime has no device");
    used_ = std::min(n, devices_);
    peer_ok_.assign(static_cast<std::size_t>(used_ * used_), false);
    for (int a = 0; a < used_; ++a)
      for (int b = 0; b < used_; ++b)
        if (a != b && rt_->can_access_peer(a, b)) {
          rt_->enable_peer_access(a, b);
          peer_ok_[static_cast<std::size_t>(a * used_ + b)] = true;
        }
    free_events_.resize(static_cast<std::size_t>(used_));
    for (int r = 0; r < n; ++r) {
      ranks_.push_back(std::make_unique<RankTransport>(*this, r));
      streams_.push_back(rt_->create_stream(device(r)));
    }
    dead_.assign(static_cast<std::size_t>(n), false);
    told_lost_.assign(static_cast<std::size_t>(n * n), false);
    senders_.resize(static_cast<std::size_t>(n));
  }
  ~Impl() {
    for (auto& per_device : free_events_)
      for (Event e : per_device) rt_->destroy_event(e);
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  int device(int rank) const { return rank % devices_; }
  Stream stream(int rank) const { return streams_[static_cast<std::size_t>(rank)]; }
  DeviceRuntime& rt() { return *rt_; }
  RankTransport& rank(int r) { return *ranks_[static_cast<std::size_t>(r)]; }
  bool crashed(int r) const { return dead_[static_cast<std::size_t>(r)]; }
  std::uint64_t events() const { return events_; }
  Nanos clock() const { return static_cast<Nanos>(events_) + jump_; }

  // ---- what the ranks' transports do ----------------------------------------

  void post(int src, const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
    if (crashed(src)) return;  // a dead rank sends nothing
    Item it{Item::Kind::kDeliver, h.dst};
    it.ptr = cookie;
    it.header = h;
    if (h.kind == FrameKind::kNack) {
      it.host = std::vector<std::byte>(payload.begin(), payload.end());  // host text
    } else if (!payload.empty()) {
      it.payload = payload.data();
      it.ready = take_event(device(src));
      rt_->record(it.ready, stream(src));  // the payload as src's stream has made it so far
      Sender& me = senders_[static_cast<std::size_t>(src)];
      it.payload_seq = me.posted++;
      me.in_transit.insert(it.payload_seq);
    }
    queue_.push_back(std::move(it));
  }
  void resume_later(int rank, std::coroutine_handle<> h) {
    Item it{Item::Kind::kResume, rank};
    it.ptr = h.address();
    queue_.push_back(std::move(it));
  }
  void timer(int rank, Nanos when, std::coroutine_handle<> h) { timers_.emplace(when, std::make_pair(rank, h.address())); }

  // dst = dst op src on `rank`'s stream. A kernel on the rank's device reads
  // another device's memory only with peer access; without it, src is first
  // copied next to dst.
  void reduce_on(int rank, void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
    const int mine = device(rank);
    const int theirs = used_ > 1 ? rt_->device_of(src) : mine;
    if (theirs >= 0 && theirs != mine && !peer_ok_[static_cast<std::size_t>(mine * used_ + theirs)]) {
      const std::size_t bytes = count * dtype_size(dtype);
      void* near = rt_->allocate(bytes, stream(rank));
      rt_->copy(near, src, bytes, stream(rank));
      rt_->reduce(dst, near, count, dtype, op, stream(rank));
      rt_->free(near, stream(rank));
      return;
    }
    rt_->reduce(dst, src, count, dtype, op, stream(rank));
  }

  std::shared_ptr<std::byte> allocate(int rank, std::size_t bytes) {
    auto* p = static_cast<std::byte*>(rt_->allocate(bytes == 0 ? 1 : bytes, stream(rank)));
    return std::shared_ptr<std::byte>(p, [this, rank](std::byte* q) { release(rank, q); });
  }
  // Gives `p` back in `rank`'s stream order once every payload `rank`
  // posted before now has arrived (one posted later cannot be in `p`).
  void release(int rank, std::byte* p) {
    Sender& me = senders_[static_cast<std::size_t>(rank)];
    if (me.in_transit.empty()) return rt_->free(p, stream(rank));
    me.deferred.emplace_back(me.posted, p);
  }

  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
    if (running_)
      throw Error(ErrorKind::kUsage, OpContext{}, "blocking wait inside a cuda rank's callback; use co_await");
    running_ = true;
    struct Reset {
      bool& b;
      ~Reset() { b = false; }
    } reset{running_};
    while (!done()) {
      if (deadline && clock() >= *deadline) return false;
      if (!queue_.empty()) {
        Item it = std::move(queue_.front());
        queue_.pop_front();
        ++events_;
        process(it);
        poll(false);
        continue;
      }
      if (!in_flight_.empty()) {
        poll(true);
        continue;
      }
      if (!timers_.empty() && (!deadline || timers_.begin()->first < *deadline)) {
        // Nothing else can happen: the clock jumps to the earliest timer.
        auto t = timers_.begin();
        jump_ = std::max(jump_, t->first - static_cast<Nanos>(events_));
        resume_later(t->second.first, std::coroutine_handle<>::from_address(t->second.second));
        timers_.erase(t);
        continue;
      }
      if (deadline) return false;
      throw Error(ErrorKind::kDeadlock, OpContext{}, "cuda: no frame, device work, timer or coroutine is pending");
    }
    return true;
  }

  void crash(int rank, const std::string& why) {
    dead_[static_cast<std::size_t>(rank)] = true;
    for (int p = 0; p < size(); ++p) {
      if (p == rank) continue;
      Item it{Item::Kind::kLost, p};
      it.peer = rank;
      it.why = why;
      queue_.push_back(std::move(it));
    }
  }

 private:
  struct Item {
    enum class Kind : std::uint8_t { kResume, kDeliver, kSent, kLost };
    Item(Kind k, int r) : kind(k), rank(r) {}
    Kind kind;
    int rank;                            // resumed, delivered to, completing, told
    void* ptr = nullptr;                 // kResume: the coroutine; kDeliver, kSent: the sender's cookie
    FrameHeader header{};                // kDeliver
    const std::byte* payload = nullptr;  // kDeliver: the sender's device memory (null: no device payload)
    std::vector<std::byte> host;         // kDeliver of a NACK: its text
    Event ready{};                       // kDeliver: recorded on the sender's stream by post_send
    std::uint64_t payload_seq = 0;       // kDeliver: the sender's count of payloads posted before this one
    int peer = -1;                       // kLost: the rank lost; kSent: the frame's receiver
    std::string why;                     // kLost
  };
  // Device work of one delivery, queued on dst's stream behind `done`.
  struct InFlight {
    Event done;
    FrameHeader header;
    void* cookie = nullptr;
    std::byte* landed = nullptr;  // the receive buffer it went to; null: handed over through on_frame
    std::uint64_t payload_seq = 0;
  };
  // A rank's payloads in transit (queued or being read), by the order it
  // posted them, and the releases of its memory that wait for them.
  struct Sender {
    std::uint64_t posted = 0;
    std::set<std::uint64_t> in_transit;
    std::deque<std::pair<std::uint64_t, std::byte*>> deferred;  // (payloads posted before it, memory), in order
  };

  Event take_event(int dev) {
    auto& pool = free_events_[static_cast<std::size_t>(dev)];
    if (pool.empty()) return rt_->create_event(dev);
    const Event e = pool.back();
    pool.pop_back();
    return e;
  }
  void give_event(int dev, Event e) { free_events_[static_cast<std::size_t>(dev)].push_back(e); }

  bool told_lost(int rank, int peer) const { return told_lost_[static_cast<std::size_t>(rank * size() + peer)]; }

  // Payload `seq` of `src` is no longer in transit: the releases that
  // waited only for payloads before the oldest one still in transit go.
  void arrived(int src, std::uint64_t seq) {
    Sender& me = senders_[static_cast<std::size_t>(src)];
    me.in_transit.erase(seq);
    const std::uint64_t oldest = me.in_transit.empty() ? me.posted : *me.in_transit.begin();
    while (!me.deferred.empty() && me.deferred.front().first <= oldest) {
      rt_->free(me.deferred.front().second, stream(src));
      me.deferred.pop_front();
    }
  }

  void complete_send(int src, int dst, void* cookie) {
    if (!cookie) return;
    Item it{Item::Kind::kSent, src};
    it.ptr = cookie;
    it.peer = dst;
    queue_.push_back(std::move(it));
  }

  void process(Item& it) {
    switch (it.kind) {
      case Item::Kind::kResume:
        if (!crashed(it.rank)) std::coroutine_handle<>::from_address(it.ptr).resume();
        return;
      case Item::Kind::kSent:
        // Not to a dead rank, nor for a send its rank was told is lost (the
        // core failed and forgot it then).
        if (!crashed(it.rank) && !told_lost(it.rank, it.peer)) rank(it.rank).sink()->on_send_complete(it.ptr);
        return;
      case Item::Kind::kLost:
        if (crashed(it.rank)) return;
        told_lost_[static_cast<std::size_t>(it.rank * size() + it.peer)] = true;
        rank(it.rank).sink()->on_peer_lost(it.peer, it.why, false);
        return;
      case Item::Kind::kDeliver: return deliver(it);
    }
  }

  void deliver(Item& it) {
    const int src = it.header.src, dst = it.rank;
    if (!it.payload) {  // control frames, empty payloads, NACKs: nothing for the device to do
      if (crashed(dst) || crashed(src)) return;
      rank(dst).sink()->on_frame(it.header, it.host);
      complete_send(src, dst, it.ptr);
      return;
    }
    if (crashed(dst) || crashed(src)) {
      give_event(device(src), it.ready);
      return arrived(src, it.payload_seq);
    }
    const Stream on = stream(dst);
    if (bug_ != TransportBug::kSkipsPeerWait) rt_->wait(on, it.ready);  // the bug: no wait
    give_event(device(src), it.ready);  // the wait captured it; it may be recorded again
    const std::size_t bytes = it.header.bytes;
    InFlight f{take_event(device(dst)), it.header, it.ptr, nullptr, it.payload_seq};
    const FrameSink::Landing l = rank(dst).sink()->landing_zone(it.header);
    if (l.dst.data() && l.dst.size() == bytes) {
      f.landed = l.dst.data();
      if (l.reduce) reduce_on(dst, f.landed, it.payload, bytes / dtype_size(l.dtype), l.dtype, l.op);
      else rt_->copy(f.landed, it.payload, bytes, on);
    } else {
      rank(dst).sink()->on_frame(it.header, {it.payload, bytes});  // the core queues its reads on `on`
    }
    rt_->record(f.done, on);
    if (bug_ == TransportBug::kCompletesSendsEarly) {  // the bug: before the reader ran
      complete_send(src, dst, f.cookie);
      f.cookie = nullptr;
    }
    in_flight_.push_back(f);
  }

  void finish(const InFlight& f) {
    const int src = f.header.src, dst = f.header.dst;
    give_event(device(dst), f.done);
    arrived(src, f.payload_seq);
    if (f.landed && !crashed(dst)) rank(dst).sink()->on_frame(f.header, {f.landed, f.header.bytes});
    if (!crashed(src)) complete_send(src, dst, f.cookie);
  }

  // Completes the in-flight work whose events have completed; with `block`,
  // waits for the oldest when none has.
  void poll(bool block) {
    std::vector<InFlight> ready;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (rt_->query(it->done)) {
        ready.push_back(*it);
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
    if (block && ready.empty()) {
      rt_->synchronize(in_flight_.front().done);
      ready.push_back(in_flight_.front());
      in_flight_.pop_front();
    }
    for (const InFlight& f : ready) finish(f);
  }

  std::unique_ptr<DeviceRuntime> rt_;
  const TransportBug bug_;
  int devices_ = 1;  // the runtime's
  int used_ = 1;     // devices holding ranks: 0 .. used_-1
  std::vector<bool> peer_ok_;  // [a * used_ + b]: kernels on a may touch b's memory
  std::vector<std::unique_ptr<RankTransport>> ranks_;
  std::vector<Stream> streams_;
  std::vector<std::vector<Event>> free_events_;  // per device
  std::deque<Item> queue_;
  std::deque<InFlight> in_flight_;
  std::multimap<Nanos, std::pair<int, void*>> timers_;
  std::vector<bool> dead_;
  std::vector<bool> told_lost_;                    // [rank * n + peer]: rank's sink heard peer is lost
  std::vector<Sender> senders_;  // per rank
  std::uint64_t events_ = 0;
  Nanos jump_ = 0;
  bool running_ = false;
};

namespace {

int RankTransport::world_size() const { return w_.size(); }
void RankTransport::post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  w_.post(rank_, h, payload, cookie);
}
void RankTransport::schedule(std::coroutine_handle<> h) { w_.resume_later(rank_, h); }
void RankTransport::schedule_at(Nanos when, std::coroutine_handle<> h) { w_.timer(rank_, when, h); }
bool RankTransport::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  return w_.run_until(done, deadline);
}
Nanos RankTransport::now() const { return w_.clock(); }
void RankTransport::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) w_.rt().copy(dst, src, bytes, w_.stream(rank_));
}
void RankTransport::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  if (count != 0) w_.reduce_on(rank_, dst, src, count, dtype, op);
}
void RankTransport::finish_average(void* dst, std::size_t count, DType dtype, int divisor) {
  if (count != 0) w_.rt().finish_average(dst, count, dtype, divisor, w_.stream(rank_));
}
std::shared_ptr<std::byte> RankTransport::allocate(std::size_t bytes) { return w_.allocate(rank_, bytes); }

}  // namespace

CudaWorld::CudaWorld(std::unique_ptr<DeviceRuntime> runtime, const CudaWorldOptions& options)
    : impl_(std::make_unique<Impl>(std::move(runtime), options)) {}
CudaWorld::~CudaWorld() = default;

Transport& CudaWorld::transport(int rank) { return impl_->rank(rank); }
std::uint64_t CudaWorld::events() const { return impl_->events(); }
void CudaWorld::crash(int rank, const std::string& why) { impl_->crash(rank, why); }
bool CudaWorld::crashed(int rank) const { return impl_->crashed(rank); }
int CudaWorld::world_size() const { return impl_->size(); }
DeviceRuntime& CudaWorld::runtime() { return impl_->rt(); }
int CudaWorld::device(int rank) const { return impl_->device(rank); }
Stream CudaWorld::stream(int rank) const { return impl_->stream(rank); }
std::shared_ptr<std::byte> CudaWorld::allocate(int rank, std::size_t bytes) { return impl_->allocate(rank, bytes); }

}  // namespace collie::cuda
