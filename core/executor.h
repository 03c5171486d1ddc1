// Executor: what resumes coroutines -- ops, algorithms, rank programs -- and
// keeps a rank's clock. Every Transport is one (the transport drives its
// rank's ops as frames arrive); so is the driver of an op-level job whose
// ranks are processes of another library (backends/remote).
//
// Contract
// --------
// One thread at a time calls an Executor, and scheduled coroutines are
// resumed only from inside run_until()'s own loop on that thread: never
// inside schedule(), schedule_at() or any other call the core makes into
// it (a Transport's post_send() and schedule_after_compute() too). The
// core marks those calls (core/transport_call.h); a resumption inside one
// is reported as the executor's contract violation and fails the run,
// never crashes it. Each handle is resumed exactly once: resuming one
// twice, or one never given, is beyond what the core can check (as writing
// through a stale pointer is).
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <optional>

namespace collie {

struct WorkState;

// Virtual or real time in nanoseconds since the executor started.
using Nanos = std::int64_t;

class Executor {
 public:
  virtual ~Executor() = default;

  // Resumes `h` later, from inside run_until(), never inside this call.
  virtual void schedule(std::coroutine_handle<> h) = 0;

  // Resumes `h` once this executor's clock (now()) reads at least `when`;
  // never earlier, and never inside this call.
  virtual void schedule_at(Nanos when, std::coroutine_handle<> h) = 0;

  // Runs callbacks and scheduled coroutines until `done()` is true, or until
  // `deadline` (absolute, in now()'s time) passes. Returns true when done()
  // became true, false on the deadline. Throws collie::Error(kDeadlock) when
  // nothing can ever make done() true, and collie::Error(kUsage) when called
  // from inside a callback of the same executor (a simulated rank must
  // co_await instead of blocking).
  virtual bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) = 0;

  // The clock: never goes back.
  virtual Nanos now() const = 0;

  // A coroutine (co_await) or Work::wait() starts waiting for `work`, which
  // has not completed. Executors whose ops complete only once waited for (a
  // library's async handle, waited on in another process) start that wait
  // here; the default does nothing. Must not throw; may be called more than
  // once for the same Work.
  virtual void awaited(WorkState& work) noexcept { (void)work; }
};

}  // namespace collie
