#include "core/work.h"

#include "core/error.h"
#include "core/transport_call.h"

namespace collie {

void Work::await_resume() const {
  // A transport that resumed this coroutine inside a call of the core's is
  // noted (core/transport_call.h), not thrown at: the op's own outcome
  // stands, and the rank's engine fails every op with the violation next.
  if (TransportCall::current()) [[unlikely]]
    note_resumed_inside_call(s_ ? s_->executor : nullptr, s_ ? s_->describe() : std::string("an op"));
  if (s_ && s_->error) std::rethrow_exception(s_->error);
}

void WorkState::finish(std::exception_ptr err) {
  if (completed) return;
  completed = true;
  error = std::move(err);
  if (on_finish) {
    auto f = std::move(on_finish);
    on_finish = nullptr;
    f();
  }
  if (waiter) {
    auto h = std::exchange(waiter, {});
    TransportCall call("schedule()");
    executor->schedule(h);
  }
}

void Work::wait() {
  if (!s_ || s_->completed) {
    await_resume();
    return;
  }
  auto st = s_;
  st->executor->awaited(*st);
  st->executor->run_until([st] { return st->completed; }, std::nullopt);
  await_resume();
}

void Work::wait(Nanos timeout) {
  if (!s_ || s_->completed) {
    await_resume();
    return;
  }
  auto st = s_;
  st->executor->awaited(*st);
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
  s->description = std::move(description);
  return Work(std::move(s));
}

std::string WorkState::describe() const {
  if (!description.empty() || !info) return description;
  return info->describe();
}

}  // namespace collie
