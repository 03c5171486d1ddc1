// TcpEventLoop: the TCP backend's executor. TcpTransport's schedule(),
// schedule_at() and run_until() (core/executor.h) come here: one Asio
// io_context, a queue of coroutines ready to resume, and timers, all driven
// by run_until() on one thread. A process running one rank (collie launch)
// has one loop and one TcpTransport; the in-process test world (backend
// "tcp") drives every rank's transport -- each with its own real loopback
// sockets -- from one loop, with no threads at all. The loop knows the
// transports only as Sources.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <coroutine>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "core/executor.h"

namespace collie::tcp {

class TcpEventLoop {
 public:
  // Sockets the loop polls itself while it spins (poll(2) on a few sockets
  // costs far less than epoll_wait(2) on this path), falling back to Asio's
  // epoll only to sleep. Registered by each transport on the loop.
  class Source {
   public:
    virtual ~Source() = default;
    // Work that needs no system call (deferred completions); true if any ran.
    virtual bool run_ready() = 0;
    // Reads and writes whatever the sockets allow now, without blocking;
    // true if anything moved.
    virtual bool poll_sockets() = 0;
    // The loop is about to sleep in epoll: every socket that can make
    // progress must wake it. Returns true, instead, when something is ready
    // now (the loop then does not sleep).
    virtual bool arm() = 0;
    // Nothing of this source is in flight: every connection has finished
    // its handshake or is gone, nothing is queued to send or half read, and
    // the kernel holds no byte of its sockets either way. When every source
    // of a loop that holds both ends of every connection is settled, only
    // a coroutine or a timer can move anything.
    virtual bool settled() const { return false; }
  };

  // `idle_deadlock_ms`: with nothing to resume, no I/O and no timer for
  // this long, run_until() declares a deadlock (0: wait forever, as real
  // jobs do -- use timeouts there). With every source settled as well
  // (the loop holds both ends of every connection: the in-process world),
  // kSettledDeadlockMs of that is enough.
  // `spin_ns`: with nothing to do, keep polling the sockets this long after
  // the last progress before sleeping in epoll (latency against CPU).
  explicit TcpEventLoop(int idle_deadlock_ms = 0, Nanos spin_ns = 0);
  static constexpr int kSettledDeadlockMs = 30;
  asio::io_context& io() { return io_; }
  void set_spin_ns(Nanos spin_ns) { spin_ns_ = spin_ns; }
  Nanos now() const;
  void ready(std::coroutine_handle<> h) { ready_.push_back(h); }
  void at(Nanos when, std::coroutine_handle<> h) { timers_.emplace(when, h); }
  void call(std::function<void()> f) { calls_.push_back(std::move(f)); }
  void add_source(Source* s) { sources_.push_back(s); }
  void remove_source(Source* s) { std::erase(sources_, s); }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline);
  std::uint64_t events() const { return events_; }

 private:
  asio::io_context io_;  // used by one thread only: no locking (ASIO_CONCURRENCY_HINT_UNSAFE)
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::deque<std::coroutine_handle<>> ready_;
  std::deque<std::function<void()>> calls_;
  std::vector<Source*> sources_;
  std::multimap<Nanos, std::coroutine_handle<>> timers_;
  std::chrono::steady_clock::time_point start_;
  int idle_ms_;
  Nanos spin_ns_;
  bool running_ = false;
  std::uint64_t events_ = 0;
};

}  // namespace collie::tcp
