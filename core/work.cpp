#include "core/work.h"

#include "core/error.h"
#include "core/send_scribble.h"
#include "core/transport_call.h"

namespace collie {

void Work::await_resume() const {
  // A transport that resumed this coroutine inside a call of the core's is
  // noted (core/transport_call.h), not thrown at: the op's own outcome
  // stands, and the rank's engine fails every op with the violation next.
  if (TransportCall::current()) [[unlikely]]
    note_resumed_inside_call(s_ ? s_->executor : nullptr, s_ ? s_->describe() : std::string("an op"));
  // The rank runs again: what its core scribbled is put back first.
  if (s_) restore_scribbles(s_->executor);
  if (s_ && s_->error) std::rethrow_exception(s_->error);
}

void WorkState::finish(std::exception_ptr err) {
  if (completed) return;
  completed = true;
  error = std::move(err);
  if (extra && extra->on_finish) {
    auto f = std::move(extra->on_finish);
    extra->on_finish = nullptr;
    f();
  }
  if (waiter) {
    auto h = std::exchange(waiter, {});
    TransportCall call("schedule()");
    executor->schedule(h);
  }
}

namespace {
// Tells the executors of `w` and of its parts that a wait for it starts.
void tell_awaited(WorkState& w) noexcept {
  if (w.executor) w.executor->awaited(w);
  if (!w.extra) return;
  for (const auto& p : w.extra->parts)
    if (!p->completed) tell_awaited(*p);
}

// A timed wait: whichever of the op's end and the deadline comes first
// resumes the waiter, and the other then does nothing.
struct Race {
  std::coroutine_handle<> waiter;
  bool settled = false;
};

Spawned expire_at(std::shared_ptr<WorkState> s, std::shared_ptr<Race> race, Nanos deadline) {
  co_await SleepUntil{*s->executor, deadline};
  if (race->settled || s->completed) co_return;
  race->settled = true;
  s->waiter = nullptr;  // the op's end resumes nobody now
  TransportCall call("schedule()");
  s->executor->schedule(race->waiter);
}

struct UntilAwaiter {
  std::shared_ptr<WorkState> s;
  Nanos deadline;
  SpawnRegistry* timers;
  std::shared_ptr<Race> race = std::make_shared<Race>();
  bool await_ready() const noexcept { return s->completed || s->executor->now() >= deadline; }
  void await_suspend(std::coroutine_handle<> h) {
    race->waiter = h;
    s->waiter = h;
    tell_awaited(*s);
    timers->spawn(expire_at(s, race, deadline));
  }
  bool await_resume() const noexcept {
    race->settled = true;
    return s->completed;
  }
};
}  // namespace

void SleepUntil::await_suspend(std::coroutine_handle<> h) const {
  TransportCall call("schedule_at()");
  executor.schedule_at(when, h);
}

Task<bool> await_until(Work w, Nanos deadline, SpawnRegistry& timers) {
  if (!w.state()) co_return true;
  co_return co_await UntilAwaiter{w.state(), deadline, &timers};
}

void Work::await_suspend(std::coroutine_handle<> h) noexcept {
  s_->waiter = h;
  tell_awaited(*s_);
}

void Work::wait() {
  if (!s_ || s_->completed) {
    await_resume();
    return;
  }
  auto st = s_;
  tell_awaited(*st);
  st->executor->run_until([st] { return st->completed; }, std::nullopt);
  await_resume();
}

void Work::wait(Nanos timeout) {
  if (!s_ || s_->completed) {
    await_resume();
    return;
  }
  auto st = s_;
  tell_awaited(*st);
  const Nanos deadline = st->executor->now() + timeout;
  if (!st->executor->run_until([st] { return st->completed; }, deadline)) {
    OpContext ctx;
    ctx.rank = st->info ? st->info->rank : -1;
    throw Error(ErrorKind::kTimeout, ctx,
                st->describe() + " did not complete within " + std::to_string(timeout) + " ns");
  }
  await_resume();
}

Work completed_work(Executor* e, bool not_member, std::string description) {
  auto s = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  s->executor = e;
  s->completed = true;
  s->not_member = not_member;
  if (!description.empty()) s->more().description = std::move(description);
  return Work(std::move(s));
}

Work join_works(Executor* e, std::vector<Work> parts, std::string description) {
  auto joined = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  joined->executor = e;
  joined->more().description = std::move(description);
  joined->posted_at = e ? e->now() : 0;
  // Shared by the parts' completions; holds the joined state weakly, so a
  // part that never completes keeps nothing else alive.
  struct Join {
    std::size_t left = 0;
    std::weak_ptr<WorkState> joined;
    std::vector<std::weak_ptr<WorkState>> parts;  // in order, for the first error
    void one_done() {
      if (--left > 0) return;
      auto j = joined.lock();
      if (!j) return;
      std::exception_ptr first;
      for (const auto& weak : parts)
        if (auto p = weak.lock(); p && p->error) {
          first = p->error;
          break;
        }
      j->finish(first);
    }
  };
  auto join = std::make_shared<Join>();
  join->joined = joined;
  for (Work& w : parts) {
    if (!w.state()) continue;
    join->parts.push_back(w.state());
    joined->extra->parts.push_back(w.state());
  }
  join->left = join->parts.size() + 1;  // + 1 until every part is hooked
  for (const auto& p : joined->extra->parts) {
    if (p->completed) {
      --join->left;
      continue;
    }
    auto before = std::move(p->more().on_finish);
    p->extra->on_finish = [before = std::move(before), join] {
      if (before) before();
      join->one_done();
    };
  }
  join->one_done();
  return Work(std::move(joined));
}

const std::string& WorkState::description() const {
  static const std::string kNone;
  return extra ? extra->description : kNone;
}

std::string WorkState::describe() const {
  if (!description().empty() || !info) return description();
  return info->describe();
}

}  // namespace collie
