// LibraryExecutor: the Executor of a Dist over a library that completes
// work on its own -- MPI requests, CUDA events. Coroutines are resumed in
// FIFO order, timers run on the host's steady clock, and whenever nothing
// is ready the library is asked to make progress (progress()).
//
// Contract for subclasses: progress() completes some outstanding library
// work and runs its continuations (which schedule() coroutines), and
// returns true; or returns false at once when nothing is outstanding. It
// may block while work is outstanding (MPI_Waitany), so timers wait for it.
// test() does what progress() does without ever blocking (MPI_Test on each
// request, cudaEventQuery): it completes what has completed and returns.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "core/executor.h"

namespace collie {

class LibraryExecutor : public Executor {
 public:
  void schedule(std::coroutine_handle<> h) override { ready_.push_back(h); }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override { timers_.emplace(when, h); }
  // Throws Error(kDeadlock) with deadlock_text() when nothing is ready,
  // no timer is armed and the library has nothing outstanding.
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override;
  Nanos now() const override;
  // One step of a program that polls a handle instead of waiting: resumes
  // what is ready and due, asks the library once, without blocking
  // (test()), whether more completed, and resumes that. Returns done().
  bool poll(const std::function<bool()>& done);

 protected:
  virtual bool progress() = 0;
  virtual void test() = 0;
  // Why nothing can complete ("no MPI request is outstanding").
  virtual std::string deadlock_text() const = 0;

 private:
  void run_ready();
  void take_due_timers();

  std::deque<std::coroutine_handle<>> ready_;
  std::multimap<Nanos, std::coroutine_handle<>> timers_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace collie
