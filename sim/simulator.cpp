#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace collie::sim {

namespace {

Nanos bytes_to_ns(std::uint64_t bytes, double GBps) {
  if (GBps <= 0) return 0;
  return static_cast<Nanos>(std::llround(static_cast<double>(bytes) / GBps));
}
}  // namespace

class Simulator::Endpoint final : public Transport {
 public:
  Endpoint(Simulator& sim, int rank) : sim_(sim), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return sim_.world_size_; }
  void attach(FrameSink* sink) override { sink_ = sink; }
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override {
    sim_.post_send(rank_, h, payload, cookie);
  }
  void schedule(std::coroutine_handle<> h) override {
    sim_.push(sim_.now_, EventKind::kResume, rank_, h.address());
  }
  void schedule_after_compute(std::uint64_t bytes, std::coroutine_handle<> h) override {
    sim_.schedule_after_compute(rank_, bytes, h);
  }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override {
    return sim_.run_until(done, deadline);
  }
  Nanos now() const override { return sim_.now_; }
  FrameSink* sink() const { return sink_; }

 private:
  Simulator& sim_;
  const int rank_;
  FrameSink* sink_ = nullptr;
};

Simulator::Simulator(int world_size, std::uint64_t seed, NetworkModel model)
    : world_size_(world_size), seed_(seed), model_(model), prng_(seed) {
  const auto n = static_cast<std::size_t>(world_size);
  endpoints_.reserve(n);
  for (int r = 0; r < world_size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
  clocks_.assign(n, 0);
  nic_free_.assign(n, 0);
  cpu_free_.assign(n, 0);
}

Simulator::~Simulator() = default;

Transport& Simulator::transport(int rank) { return *endpoints_[static_cast<std::size_t>(rank)]; }

void Simulator::push(Nanos time, EventKind kind, int rank, void* ptr, std::uint32_t frame) {
  heap_.push_back(Event{time, prng_.next(), order_++, kind, rank, ptr, frame});
  std::push_heap(heap_.begin(), heap_.end(), EventLater{});
}

void Simulator::post_send(int src, const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  const bool same_node = model_.ranks_per_node <= 0 || src / model_.ranks_per_node == h.dst / model_.ranks_per_node;
  const LinkModel& link = same_node ? model_.intra : model_.inter;
  const Nanos start = std::max(now_, nic_free_[static_cast<std::size_t>(src)]);
  const Nanos inject = bytes_to_ns(h.bytes, link.bandwidth_GBps);
  nic_free_[static_cast<std::size_t>(src)] = start + inject;
  double alpha = link.alpha_us * 1000.0;
  if (model_.jitter_fraction > 0) alpha *= 1.0 + model_.jitter_fraction * prng_.uniform();
  const Nanos arrival = start + inject + static_cast<Nanos>(std::llround(alpha));

  std::uint32_t slot;
  if (!free_frames_.empty()) {
    slot = free_frames_.back();
    free_frames_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(frames_in_flight_.size());
    frames_in_flight_.emplace_back();
  }
  InFlight& f = frames_in_flight_[slot];
  f.header = h;
  f.cookie = cookie;
  f.borrowed = nullptr;
  f.copy.clear();
  // Payloads up to the eager threshold are buffered when posted (the eager
  // buffer of a real transport) and the send completes at injection; larger
  // ones are read from the sender's buffer at delivery, and the send completes
  // then, so the simulator holds no copy of them.
  if (payload.size() <= model_.eager_threshold_bytes) {
    f.copy.assign(payload.begin(), payload.end());
    f.complete_on_delivery = false;
    if (cookie) push(start + inject, EventKind::kSendComplete, src, cookie);
  } else {
    f.borrowed = payload.data();
    f.complete_on_delivery = true;
  }
  push(arrival, EventKind::kDeliver, h.dst, nullptr, slot);
}

void Simulator::schedule_after_compute(int rank, std::uint64_t bytes, std::coroutine_handle<> h) {
  Nanos& cpu = cpu_free_[static_cast<std::size_t>(rank)];
  cpu = std::max(now_, cpu) + bytes_to_ns(bytes, model_.reduce_GBps);
  push(cpu, EventKind::kResume, rank, h.address());
}

void Simulator::mix(std::uint64_t v) {
  hash_ ^= v + 0x9e3779b97f4a7c15ull + (hash_ << 6) + (hash_ >> 2);
  hash_ *= 0x100000001b3ull;
}

void Simulator::process(const Event& e) {
  ++events_;
  clocks_[static_cast<std::size_t>(e.rank)] = now_;
  switch (e.kind) {
    case EventKind::kResume:
      std::coroutine_handle<>::from_address(e.ptr).resume();
      return;
    case EventKind::kSendComplete:
      endpoints_[static_cast<std::size_t>(e.rank)]->sink()->on_send_complete(e.ptr);
      return;
    case EventKind::kDeliver: {
      // Move the frame out first: the sink may post sends that reuse slots.
      InFlight f = std::move(frames_in_flight_[e.frame]);
      free_frames_.push_back(e.frame);
      const FrameHeader& h = f.header;
      ++frames_;
      bytes_ += h.bytes;
      mix(static_cast<std::uint64_t>(now_));
      mix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(h.src)) << 32) |
          static_cast<std::uint32_t>(h.dst));
      mix((static_cast<std::uint64_t>(h.kind) << 56) ^ (static_cast<std::uint64_t>(h.context) << 24) ^
          static_cast<std::uint32_t>(h.tag));
      mix(h.channel_seq ^ (h.rendezvous_id << 20) ^ (h.fp.seq << 40));
      mix(h.bytes);
      std::span<const std::byte> payload = f.borrowed ? std::span<const std::byte>(f.borrowed, h.bytes)
                                                      : std::span<const std::byte>(f.copy);
      endpoints_[static_cast<std::size_t>(h.dst)]->sink()->on_frame(h, payload);
      if (f.complete_on_delivery && f.cookie) {
        clocks_[static_cast<std::size_t>(h.src)] = std::max(clocks_[static_cast<std::size_t>(h.src)], now_);
        endpoints_[static_cast<std::size_t>(h.src)]->sink()->on_send_complete(f.cookie);
      }
      return;
    }
  }
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
    if (heap_.empty() && deadline) {
      now_ = std::max(now_, *deadline);  // virtual time passes even when nothing happens
      return false;
    }
    if (heap_.empty()) {
      throw Error(ErrorKind::kDeadlock, OpContext{},
                  "no event can run at t=" + std::to_string(now_) + "ns and the awaited op is not complete");
    }
    if (deadline && heap_.front().time > *deadline) {
      now_ = std::max(now_, *deadline);
      return false;
    }
    std::pop_heap(heap_.begin(), heap_.end(), EventLater{});
    const Event e = heap_.back();
    heap_.pop_back();
    now_ = e.time;
    process(e);
  }
  return true;
}

}  // namespace collie::sim
