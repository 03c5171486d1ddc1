// Work: the handle of an op in flight (torch's Work / DistributedRequest).
//
// Every op returns a Work. It completes exactly once: successfully, with an
// error, or at once as "not a member" when the calling rank is outside the
// op's group. Blocking is done in one of two ways:
//   - in a coroutine (every rank program on the simulator):  co_await work;
//   - in plain code with one rank per process:               work.wait();
// Both rethrow the op's error. wait() drives the rank's executor until the
// op completes; calling it from inside a simulated rank is a usage error.
#pragma once

#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/op_info.h"
#include "core/task.h"
#include "core/executor.h"

namespace collie {

struct WorkState {
  Executor* executor = nullptr;          // resumes the waiter; wait() runs it
  std::exception_ptr error;
  std::coroutine_handle<> waiter;         // at most one coroutine awaits a Work
  std::shared_ptr<const OpInfo> info;
  Nanos posted_at = 0;
  int source = -1;                        // global rank a receive matched
  bool completed = false;
  bool not_member = false;

  // What few ops have, kept apart (made when first set: a simulation holds
  // every rank's Work states at once, and most have none of it).
  struct Extra {
    std::string description;
    std::function<void()> on_finish;  // runs once, when the op finishes
    // A Work made of others (join_works()): waiting for it waits for each.
    std::vector<std::shared_ptr<WorkState>> parts;
  };
  std::unique_ptr<Extra> extra;
  Extra& more() {
    if (!extra) extra = std::make_unique<Extra>();
    return *extra;
  }

  // What the op is, for messages: its description when set, else built
  // from `info` on first use (ops are described lazily: most never are).
  std::string describe() const;
  const std::string& description() const;

  // Marks the op finished and schedules the awaiting coroutine, if any.
  // Later calls are ignored: the first outcome wins.
  void finish(std::exception_ptr err = nullptr);
};

class [[nodiscard]] Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> s) : s_(std::move(s)) {}

  bool is_completed() const { return s_ && s_->completed; }
  // True once completed without an error (including "not a member").
  bool is_success() const { return is_completed() && !s_->error; }
  // The error the op failed with, or null.
  std::exception_ptr exception() const { return s_ ? s_->error : nullptr; }
  // True when the calling rank is not a member of the op's group.
  bool not_member() const { return s_ && s_->not_member; }
  // For a completed receive: the global rank of the sender (any-source too).
  int source_rank() const { return s_ ? s_->source : -1; }
  std::string description() const { return s_->describe(); }

  // Blocks until completion; rethrows the op's error.
  void wait();
  // As wait(), but throws Error(kTimeout) naming the op if it has not
  // completed after `timeout` of the executor's clock. The op keeps running.
  void wait(Nanos timeout);

  bool await_ready() const noexcept { return !s_ || s_->completed; }
  void await_suspend(std::coroutine_handle<> h) noexcept;
  void await_resume() const;

  const std::shared_ptr<WorkState>& state() const { return s_; }

 private:
  std::shared_ptr<WorkState> s_;
};

// A Work that is already complete (used for non-members and empty ops).
Work completed_work(Executor* e, bool not_member, std::string description);

// Awaiting it resumes the coroutine once `executor`'s clock reads at least
// `when` (at once if it does already): a sleep on the rank's clock.
struct SleepUntil {
  Executor& executor;
  Nanos when;
  bool await_ready() const noexcept { return executor.now() >= when; }
  void await_suspend(std::coroutine_handle<> h) const;
  void await_resume() const noexcept {}
};

// Awaits `w` until it completes or its executor's clock reaches `deadline`,
// whichever is first (torch's Work.wait(timeout) in a coroutine): true once
// it completed -- its error is not thrown; co_await it to have it -- false
// when the deadline came first. The op keeps running then and may be
// awaited again. The deadline's timer runs in `timers` (it outlives a wait
// the op ended first, and then does nothing). The executor is told that a
// wait starts (Executor::awaited): one whose wait commits it to the op --
// a rank's worker process serving one call at a time -- serves nothing else
// until the op ends, deadline or not; use it where ops progress on their
// own (collie's core, the simulator).
Task<bool> await_until(Work w, Nanos deadline, SpawnRegistry& timers);

// One Work for several (torch's batch_isend_irecv requests): it completes
// once every part has, failing with the error of the first part (in
// order) that failed. Awaiting it tells each part's executor.
Work join_works(Executor* e, std::vector<Work> parts, std::string description);

// Awaits every Work in order; rethrows the first error after all completed.
template <typename Range>
Task<void> wait_all(Range& works) {
  std::exception_ptr first;
  for (Work& w : works) {
    try {
      co_await w;
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}
}  // namespace collie
