// Task<T>: the coroutine type of every op, algorithm and rank program.
//
// A Task is lazy: it starts when awaited and resumes its awaiter when it
// finishes (symmetric transfer, so chains of awaits use no stack). An exception
// thrown inside propagates to the awaiter. Tasks never run on threads of their
// own: they are resumed by whatever executor drives their transport.
//
// Spawned is a background coroutine owned by a SpawnRegistry; the core uses it
// to run an op behind a Work.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

#include "core/small_pool.h"

namespace collie {

template <typename T = void>
class Task;

namespace detail {

// Coroutine frames come from the thread's SmallPool: every op allocates and
// frees several.
struct PooledFrame {
  static void* operator new(std::size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, std::size_t bytes) noexcept { pool_deallocate(p, bytes); }
};

struct TaskPromiseBase : PooledFrame {
  std::coroutine_handle<> continuation = std::noop_coroutine();
  std::exception_ptr error;

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      return h.promise().continuation;
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error = std::current_exception(); }
};

template <typename T>
struct TaskPromise : TaskPromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <>
struct TaskPromise<void> : TaskPromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  bool valid() const { return static_cast<bool>(h_); }

  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle h;
      bool await_ready() noexcept { return !h || h.done(); }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        h.promise().continuation = awaiting;
        return h;
      }
      T await_resume() { return h.promise().take(); }
    };
    return Awaiter{h_};
  }

 private:
  Handle h_;
};

namespace detail {
template <typename T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
}  // namespace detail

// A background coroutine owned by a SpawnRegistry. spawn() starts it at once;
// it runs until its first suspension and frees its frame when it finishes.
// Frames still suspended when the registry is destroyed are destroyed with it,
// so an op that can never finish (a deadlocked program) does not leak.
// Exceptions must be caught inside the body.
class SpawnRegistry;

struct Spawned {
  struct promise_type : detail::PooledFrame {
    SpawnRegistry* registry = nullptr;
    promise_type* prev = nullptr;  // the registry's list of live frames
    promise_type* next = nullptr;
    Spawned get_return_object() noexcept {
      return Spawned{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> h) noexcept;
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

class SpawnRegistry {
 public:
  SpawnRegistry() = default;
  SpawnRegistry(const SpawnRegistry&) = delete;
  SpawnRegistry& operator=(const SpawnRegistry&) = delete;
  ~SpawnRegistry() {
    while (head_) {
      Spawned::promise_type* p = head_;
      unlink(p);
      std::coroutine_handle<Spawned::promise_type>::from_promise(*p).destroy();
    }
  }
  // Takes ownership of `s` and runs it until its first suspension.
  void spawn(Spawned s) {
    Spawned::promise_type& p = s.handle.promise();
    p.registry = this;
    p.next = head_;
    if (head_) head_->prev = &p;
    head_ = &p;
    ++live_;
    s.handle.resume();
  }
  std::size_t live() const { return live_; }

 private:
  friend struct Spawned::promise_type::FinalAwaiter;
  void unlink(Spawned::promise_type* p) noexcept {
    if (p->prev) p->prev->next = p->next;
    else head_ = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = nullptr;
    p->registry = nullptr;
    --live_;
  }
  Spawned::promise_type* head_ = nullptr;  // live frames, newest first
  std::size_t live_ = 0;
};

inline void Spawned::promise_type::FinalAwaiter::await_suspend(std::coroutine_handle<promise_type> h) noexcept {
  if (SpawnRegistry* r = h.promise().registry) r->unlink(&h.promise());
  h.destroy();
}

}  // namespace collie
