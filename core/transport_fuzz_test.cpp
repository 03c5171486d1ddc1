// Fuzzing the plugin side (built with AddressSanitizer and
// UndefinedBehaviorSanitizer, see cmake/FuzzTests.cmake): a transport whose
// every choice is drawn at random, under a program of collectives and
// point-to-point ops on collie's core. It delivers, drops, duplicates and
// reorders frames; changes a header field (sealed again or not) or a
// payload's length; lands payloads in receive buffers; completes sends at
// once, twice, never, or for cookies it was never given; resumes coroutines
// and calls back inside the core's calls into it; fires timers early;
// turns its clock back; reports peers lost, real or not; returns from
// run_until early or reports a deadlock while work is pending. Whatever it
// does, collie must not crash, touch memory out of bounds or after it is
// freed, or hang: the run ends and says how in words. (A transport that
// resumes one coroutine twice, or reads a buffer after the program freed
// it, is beyond any core's defence: this one never does.)
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "core/communicator.h"
#include "core/error.h"
#include "core/frame_check.h"
#include "core/local_world.h"

namespace collie {
namespace {

// How often each misbehaviour strikes, in 1/1000 of its chances. Most
// draws leave most of them at 0, so that runs get deep into the program.
struct Mischief {
  int drop = 0, duplicate = 0, reorder = 0, change_field = 0, reseal = 0, cut_payload = 0, land = 0;
  int deliver_inside_post = 0, complete_inside_post = 0, complete_twice = 0, never_complete = 0, bogus_cookie = 0;
  int resume_inside_call = 0, early_timer = 0, clock_back = 0, peer_lost = 0, early_return = 0, false_deadlock = 0;
};

rc::Gen<int> rate() {
  return rc::gen::weightedOneOf<int>(
      {{12, rc::gen::just(0)}, {3, rc::gen::inRange(1, 60)}, {1, rc::gen::inRange(60, 1001)}});
}

Mischief gen_mischief() {
  Mischief m;
  for (int* p : {&m.drop, &m.duplicate, &m.reorder, &m.change_field, &m.reseal, &m.cut_payload, &m.land,
                 &m.deliver_inside_post, &m.complete_inside_post, &m.complete_twice, &m.never_complete,
                 &m.bogus_cookie, &m.resume_inside_call, &m.early_timer, &m.clock_back, &m.peer_lost,
                 &m.early_return, &m.false_deadlock})
    *p = *rate();
  return m;
}

class ChaosWorld {
 public:
  ChaosWorld(int n, std::uint64_t seed, const Mischief& m) : m_(m), prng_(seed), sinks_(static_cast<std::size_t>(n)) {}
  void attach(int rank, FrameSink* sink) { sinks_[static_cast<std::size_t>(rank)] = sink; }
  int size() const { return static_cast<int>(sinks_.size()); }
  Nanos now() const { return clock_; }
  bool chance(int per_mille) { return per_mille > 0 && static_cast<int>(prng_() % 1000) < per_mille; }
  std::uint64_t below(std::uint64_t n) { return prng_() % n; }

  struct Item {
    enum Kind { kResume, kDeliver, kSent, kLost } kind;
    int rank;
    std::coroutine_handle<> h = {};
    FrameHeader header = {};
    std::vector<std::byte> payload = {};
    void* cookie = nullptr;
    int peer = 0;
  };
  void push(Item it) { queue_.push_back(std::move(it)); }

  void post(int from, const FrameHeader& given, std::span<const std::byte> payload, void* cookie) {
    FrameHeader h = given;
    std::vector<std::byte> bytes(payload.begin(), payload.end());
    if (chance(m_.change_field)) change_field(h);
    if (chance(m_.cut_payload)) bytes.resize(below(bytes.size() + 9));
    const bool valid_dst = h.dst >= 0 && h.dst < size();
    if (valid_dst && !chance(m_.drop)) {
      if (chance(m_.deliver_inside_post)) {
        sinks_[static_cast<std::size_t>(h.dst)]->on_frame(h, bytes);
      } else {
        if (chance(m_.duplicate)) push({Item::kDeliver, h.dst, {}, h, bytes});
        push({Item::kDeliver, h.dst, {}, h, std::move(bytes)});
      }
    }
    if (chance(m_.bogus_cookie))
      push({Item::kSent, from, {}, {}, {}, reinterpret_cast<void*>(static_cast<std::uintptr_t>(below(64)))});
    if (!cookie || chance(m_.never_complete)) return;
    if (chance(m_.complete_inside_post)) return sinks_[static_cast<std::size_t>(from)]->on_send_complete(cookie);
    push({Item::kSent, from, {}, {}, {}, cookie});
    if (chance(m_.complete_twice)) push({Item::kSent, from, {}, {}, {}, cookie});
  }
  void schedule(std::coroutine_handle<> h, int rank) {
    if (chance(m_.resume_inside_call)) return h.resume();  // once, but inside the core's call
    push({Item::kResume, rank, h});
  }
  void timer(Nanos when, std::coroutine_handle<> h, int rank) {
    if (chance(m_.early_timer)) return push({Item::kResume, rank, h});
    timers_.emplace(when, std::make_pair(rank, h));
  }

  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
    while (!done()) {
      if (deadline && clock_ >= *deadline) return false;
      if (chance(m_.early_return)) return false;
      if (chance(m_.false_deadlock)) throw Error(ErrorKind::kDeadlock, {}, "chaos: a deadlock reported at random");
      if (++events_ > kMaxEvents) throw Error(ErrorKind::kDeadlock, {}, "chaos: the fuzzer's event budget ran out");
      if (chance(m_.peer_lost))
        push({Item::kLost, static_cast<int>(below(static_cast<std::uint64_t>(size()))), {}, {}, {}, nullptr,
              static_cast<int>(below(static_cast<std::uint64_t>(size() + 2))) - 1});
      if (queue_.empty()) {
        if (timers_.empty()) throw Error(ErrorKind::kDeadlock, {}, "chaos: nothing to do");
        auto t = timers_.begin();
        clock_ = std::max(clock_, t->first);
        push({Item::kResume, t->second.first, t->second.second});
        timers_.erase(t);
      }
      std::size_t at = chance(m_.reorder) ? below(queue_.size()) : 0;
      Item it = std::move(queue_[at]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(at));
      clock_ += 1;
      if (chance(m_.clock_back)) clock_ -= std::min<Nanos>(clock_, static_cast<Nanos>(below(50)));
      FrameSink* sink = sinks_[static_cast<std::size_t>(it.rank)];
      switch (it.kind) {
        case Item::kResume: it.h.resume(); break;
        case Item::kSent: sink->on_send_complete(it.cookie); break;
        case Item::kLost: sink->on_peer_lost(it.peer, "lost by the chaos transport", chance(500)); break;
        case Item::kDeliver: deliver(sink, it); break;
      }
    }
    return true;
  }

 private:
  static constexpr std::uint64_t kMaxEvents = 20000;

  void deliver(FrameSink* sink, Item& it) {
    if (chance(m_.land)) {
      // A zero-copy transport writes the payload into the receive's own
      // buffer, as much of it as fits, then hands that buffer over.
      const FrameSink::Landing z = sink->landing_zone(it.header);
      if (!z.dst.empty()) {
        std::copy_n(it.payload.begin(), std::min(z.dst.size(), it.payload.size()), z.dst.begin());
        return sink->on_frame(it.header, z.dst);
      }
    }
    sink->on_frame(it.header, it.payload);
  }

  void change_field(FrameHeader& h) {
    const auto v = prng_();
    switch (below(12)) {
      case 0: h.kind = static_cast<FrameKind>(v % 8); break;  // codes past kData too
      case 1: h.src = static_cast<std::int32_t>(v % 8) - 2; break;
      case 2: h.dst = static_cast<std::int32_t>(v % 8) - 2; break;
      case 3: h.context ^= static_cast<std::uint32_t>(v % 4); break;
      case 4: h.tag ^= static_cast<std::int32_t>(v % 4); break;
      case 5: h.channel_seq += v % 3; break;
      case 6: h.rendezvous_id ^= v % 4; break;
      case 7: h.dtype = static_cast<DType>(v % 32); break;
      case 8: h.count = v % 3 == 0 ? v : h.count ^ (v % 4); break;
      case 9: h.bytes = v % 3 == 0 ? v : h.bytes ^ (v % 8); break;
      case 10: h.fp.op = static_cast<CollectiveKind>(v % 32); break;
      default: h.fp.seq ^= v % 4; break;
    }
    if (chance(m_.reseal)) seal(h);
  }

  Mischief m_;
  std::mt19937_64 prng_;
  std::vector<FrameSink*> sinks_;
  std::deque<Item> queue_;
  std::multimap<Nanos, std::pair<int, std::coroutine_handle<>>> timers_;
  Nanos clock_ = 0;
  std::uint64_t events_ = 0;
};

// One rank's view of the chaos.
class ChaosTransport final : public Transport {
 public:
  ChaosTransport(ChaosWorld& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return w_.size(); }
  void attach(FrameSink* sink) override { w_.attach(rank_, sink); }
  void post_send(const FrameHeader& h, std::span<const std::byte> p, void* c) override { w_.post(rank_, h, p, c); }
  void schedule(std::coroutine_handle<> h) override { w_.schedule(h, rank_); }
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<> h) override { w_.schedule(h, rank_); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override { w_.timer(when, h, rank_); }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override {
    return w_.run_until(done, deadline);
  }
  Nanos now() const override { return w_.now(); }

 private:
  ChaosWorld& w_;
  int rank_;
};

// Every rank: collectives small (eager) and large (rendezvous), on the
// world and on a group, a ring of point-to-point messages and a barrier,
// each under an op timeout; whatever fails is caught and the program goes
// on, so that later ops meet a core in whatever state the transport left.
// Each op has tensors of its own, freed the moment it ends, success or
// failure, as a program that lets go of them would: anything the core
// still does to a buffer after that (a late completion of a failed call's
// send) touches freed memory, which ASan reports.
Task<void> program(Communicator& c) {
  auto attempt = [](Work w) -> Task<void> {
    try {
      co_await w;
    } catch (const Error&) {
    }
  };
  const int n = c.world_size(), me = c.rank();
  auto tensor = [](DType dtype, std::int64_t count) { return std::make_unique<Tensor>(dtype, std::vector{count}); };
  auto small = tensor(DType::kFloat32, 8);
  co_await attempt(c.all_reduce(*small));
  auto large = tensor(DType::kInt32, 300);
  co_await attempt(c.all_reduce(*large, ReduceOp::kMax));
  large = tensor(DType::kInt32, 300);
  co_await attempt(c.broadcast(*large, n - 1));
  auto in = tensor(DType::kInt32, 300), out = tensor(DType::kInt32, 300);
  Work r = c.irecv(*in, (me + n - 1) % n, 3);
  Work s = c.isend(*out, (me + 1) % n, 3);
  co_await attempt(std::move(r));
  in.reset();
  co_await attempt(std::move(s));
  out.reset();
  try {
    const Group g = c.new_group({0, n - 1});
    large = tensor(DType::kInt32, 300);
    if (g.group_rank_of(me) >= 0) co_await attempt(c.all_reduce(*large, ReduceOp::kSum, g));
  } catch (const Error&) {
  }
  small = tensor(DType::kFloat32, 8);
  auto gathered = tensor(DType::kFloat32, 8 * n);
  co_await attempt(c.all_gather_into_tensor(*gathered, *small));
  small.reset();
  gathered.reset();
  large.reset();
  co_await attempt(c.barrier());
}

RC_GTEST_PROP(TransportFuzz, WhateverATransportDoesCollieNeitherCrashesNorHangs, ()) {
  const int n = *rc::gen::inRange(2, 5);
  const Mischief m = gen_mischief();
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  ChaosWorld chaos(n, seed, m);
  std::vector<std::unique_ptr<ChaosTransport>> ranks;
  std::vector<Transport*> transports;
  for (int r = 0; r < n; ++r) transports.push_back(ranks.emplace_back(std::make_unique<ChaosTransport>(chaos, r)).get());
  CommunicatorOptions o;
  o.eager_threshold_bytes = 256;       // 300 int32 go by rendezvous
  o.default_timeout_ns = 5000;         // on the chaos clock: one tick per event
  o.scribble_completed_sends = true;   // as checking runs do
  LocalWorld world(transports, o);
  const RunResult res = world.run(program, RunContext{});
  RC_ASSERT(!res.describe().empty());
  // How runs end, shown with the property's result: most meet the
  // transport's fault, some finish or deadlock, as its mischief allows.
  RC_TAG(!res.transport_fault.empty() ? "transport fault"
         : res.deadlocked                ? "deadlock"
         : res.ok()                      ? "ok"
                                         : "op errors");
}

}  // namespace
}  // namespace collie
