// An example backend plugin: every rank in this process, frames handed over
// in FIFO order through one queue, no notion of time beyond counting events.
// It is what a minimal correct transport looks like, and the conformance
// suite passes on it.
//
// Built a second time with LOOPBACK_DROP_EVERY=N as "lossy_loopback", which
// silently drops every N-th frame: a broken transport that the conformance
// suite must fail, with a report that says where things stopped.
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "backends/plugin.h"
#include "core/error.h"

#ifndef LOOPBACK_DROP_EVERY
#define LOOPBACK_DROP_EVERY 0
#endif
#ifndef LOOPBACK_NAME
#define LOOPBACK_NAME "loopback"
#endif

namespace {

using collie::FrameHeader;
using collie::Nanos;

class Loopback;

class Endpoint final : public collie::Transport {
 public:
  Endpoint(Loopback& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override;
  void attach(collie::FrameSink* sink) override { sink_ = sink; }
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override;
  void schedule(std::coroutine_handle<> h) override;
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<> h) override { schedule(h); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override;
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override;
  Nanos now() const override;
  collie::FrameSink* sink() const { return sink_; }

 private:
  Loopback& world_;
  int rank_;
  collie::FrameSink* sink_ = nullptr;
};

class Loopback final : public collie::InProcessBackend {
 public:
  explicit Loopback(int n) {
    for (int r = 0; r < n; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
  }
  collie::Transport& transport(int rank) override { return *endpoints_[static_cast<std::size_t>(rank)]; }
  std::uint64_t events() const override { return events_; }

  struct Item {
    enum Kind { kResume, kDeliver, kSent } kind;
    int rank;
    void* ptr;
    FrameHeader header;
    std::vector<std::byte> payload;
  };
  void push(Item it) { queue_.push_back(std::move(it)); }
  // Timers fire, in time order, only when nothing else can run: the clock
  // then jumps to them.
  void timer(Nanos when, int rank, void* h) { timers_.emplace(when, std::make_pair(rank, h)); }
  std::uint64_t next_frame() { return ++frames_; }
  int size() const { return static_cast<int>(endpoints_.size()); }
  Nanos clock() const { return static_cast<Nanos>(events_) + jump_; }

  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
    if (running_)
      throw collie::Error(collie::ErrorKind::kUsage, {}, "blocking wait inside a loopback rank; use co_await");
    running_ = true;
    struct Reset {
      bool& b;
      ~Reset() { b = false; }
    } reset{running_};
    while (!done()) {
      if (deadline && clock() >= *deadline) return false;
      if (queue_.empty() && !timers_.empty() && (!deadline || timers_.begin()->first < *deadline)) {
        auto t = timers_.begin();
        jump_ = std::max(jump_, t->first - static_cast<Nanos>(events_));
        queue_.push_back({Item::kResume, t->second.first, t->second.second, {}, {}});
        timers_.erase(t);
      }
      if (queue_.empty()) {
        if (deadline) return false;
        throw collie::Error(collie::ErrorKind::kDeadlock, {}, "loopback: no frame or coroutine is pending");
      }
      Item it = std::move(queue_.front());
      queue_.pop_front();
      ++events_;
      Endpoint& ep = *endpoints_[static_cast<std::size_t>(it.rank)];
      switch (it.kind) {
        case Item::kResume: std::coroutine_handle<>::from_address(it.ptr).resume(); break;
        case Item::kDeliver: ep.sink()->on_frame(it.header, it.payload); break;
        case Item::kSent: ep.sink()->on_send_complete(it.ptr); break;
      }
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::deque<Item> queue_;
  std::uint64_t events_ = 0, frames_ = 0;
  std::multimap<Nanos, std::pair<int, void*>> timers_;
  Nanos jump_ = 0;
  bool running_ = false;
};

int Endpoint::world_size() const { return world_.size(); }
Nanos Endpoint::now() const { return world_.clock(); }
void Endpoint::schedule_at(Nanos when, std::coroutine_handle<> h) { world_.timer(when, rank_, h.address()); }
void Endpoint::schedule(std::coroutine_handle<> h) { world_.push({Loopback::Item::kResume, rank_, h.address(), {}, {}}); }
bool Endpoint::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  return world_.run_until(done, deadline);
}

void Endpoint::post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  const std::uint64_t n = world_.next_frame();
  const bool drop = LOOPBACK_DROP_EVERY > 0 && n % LOOPBACK_DROP_EVERY == 0;
  if (!drop) world_.push({Loopback::Item::kDeliver, h.dst, nullptr, h, {payload.begin(), payload.end()}});
  if (cookie) world_.push({Loopback::Item::kSent, rank_, cookie, {}, {}});
}

collie::InProcessBackend* create(const collie::BackendOptions* o) { return new Loopback(o->world_size); }

const CollieBackendPlugin kPlugin{
    COLLIE_PLUGIN_ABI_VERSION, LOOPBACK_NAME,
    LOOPBACK_DROP_EVERY > 0 ? "example plugin that silently drops frames (must fail conformance)"
                            : "example plugin: in-process FIFO loopback, no virtual time",
    &create};

}  // namespace

extern "C" const CollieBackendPlugin* collie_backend_plugin() { return &kPlugin; }
