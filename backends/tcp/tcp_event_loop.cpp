#include "backends/tcp/tcp_event_loop.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace collie::tcp {

TcpEventLoop::TcpEventLoop(int idle_deadlock_ms, Nanos spin_ns)
    : io_(ASIO_CONCURRENCY_HINT_UNSAFE),
      work_(asio::make_work_guard(io_)),
      start_(std::chrono::steady_clock::now()),
      idle_ms_(idle_deadlock_ms),
      spin_ns_(spin_ns) {}

Nanos TcpEventLoop::now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
}

bool TcpEventLoop::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  if (running_)
    throw Error(ErrorKind::kUsage, OpContext{}, "a blocking wait() was called from inside a callback; use co_await");
  running_ = true;
  struct Reset {
    bool& b;
    ~Reset() { b = false; }
  } reset{running_};
  Nanos last = now();
  unsigned spin_turns = 0;
  while (!done()) {
    const Nanos t = now();  // one clock read per turn: it costs as much as a small resume
    if (deadline && t >= *deadline) return false;
    bool progressed = false;
    while (!calls_.empty()) {
      auto f = std::move(calls_.front());
      calls_.pop_front();
      f();
      progressed = true;
    }
    for (std::size_t i = 0; i < sources_.size(); ++i) progressed = sources_[i]->run_ready() || progressed;
    if (!ready_.empty()) {
      // Everything ready now runs in this turn; what it schedules waits for
      // the next one, after the sockets had their turn.
      for (std::size_t n = ready_.size(); n > 0 && !ready_.empty(); --n) {
        auto h = ready_.front();
        ready_.pop_front();
        ++events_;
        h.resume();
      }
      last = t;
      continue;
    }
    while (!timers_.empty() && timers_.begin()->first <= t) {
      ready_.push_back(timers_.begin()->second);
      timers_.erase(timers_.begin());
      progressed = true;
    }
    // A reply is often microseconds away: poll the sockets directly for a
    // while before sleeping in the kernel (a sleep and wake-up costs more
    // than a small message's whole round trip). Asio's own work --
    // handshakes, accepts, waits that fired -- runs every few turns then.
    const bool spinning = spin_ns_ > 0 && t - last < spin_ns_;
    if (spinning)
      for (std::size_t i = 0; i < sources_.size(); ++i) progressed = sources_[i]->poll_sockets() || progressed;
    if (!spinning || (++spin_turns & 7) == 0) {
      if (const std::size_t n = io_.poll()) {
        events_ += n;
        progressed = true;
      }
    }
    if (progressed) {
      last = t;
      continue;
    }
    if (spinning) continue;
    // Then wait for I/O, at most until the next timer, the deadline or 10 ms.
    bool ready_now = false;
    for (std::size_t i = 0; i < sources_.size(); ++i) ready_now = sources_[i]->arm() || ready_now;
    if (ready_now) {
      last = now();
      continue;
    }
    Nanos wait = 10'000'000;
    if (!timers_.empty()) wait = std::min(wait, timers_.begin()->first - t);
    if (deadline) wait = std::min(wait, *deadline - t);
    if (io_.run_one_for(std::chrono::nanoseconds(std::max<Nanos>(wait, 0)))) {
      ++events_;
      last = now();
      continue;
    }
    if (idle_ms_ > 0 && timers_.empty() && ready_.empty() && calls_.empty()) {
      const Nanos quiet = now() - last;
      if (quiet > static_cast<Nanos>(idle_ms_) * 1'000'000)
        throw Error(ErrorKind::kDeadlock, OpContext{},
                    "no message, timer or coroutine has moved for " + std::to_string(idle_ms_) + " ms");
      if (quiet > static_cast<Nanos>(std::min(idle_ms_, kSettledDeadlockMs)) * 1'000'000 &&
          std::all_of(sources_.begin(), sources_.end(), [](const Source* s) { return s->settled(); }))
        throw Error(ErrorKind::kDeadlock, OpContext{},
                    "nothing is in flight on any connection and no message, timer or coroutine has moved for " +
                        std::to_string(quiet / 1'000'000) + " ms");
    }
  }
  return true;
}

}  // namespace collie::tcp
