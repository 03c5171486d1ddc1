#include "core/library_executor.h"

#include <thread>

#include "core/error.h"

namespace collie {

Nanos LibraryExecutor::now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
}

void LibraryExecutor::run_ready() {
  while (!ready_.empty()) {
    auto h = ready_.front();
    ready_.pop_front();
    h.resume();
  }
}

void LibraryExecutor::take_due_timers() {
  while (!timers_.empty() && timers_.begin()->first <= now()) {
    ready_.push_back(timers_.begin()->second);
    timers_.erase(timers_.begin());
  }
}

bool LibraryExecutor::poll(const std::function<bool()>& done) {
  run_ready();
  take_due_timers();
  run_ready();
  if (done()) return true;
  test();
  run_ready();
  return done();
}

bool LibraryExecutor::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  for (;;) {
    run_ready();
    if (done()) return true;
    take_due_timers();
    if (!ready_.empty()) continue;
    if (deadline && now() >= *deadline) return false;
    if (progress()) continue;
    if (timers_.empty()) throw Error(ErrorKind::kDeadlock, OpContext{}, "nothing can complete: " + deadlock_text());
    Nanos wake = timers_.begin()->first;
    if (deadline) wake = std::min(wake, *deadline);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<Nanos>(0, wake - now())));
  }
}

}  // namespace collie
