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
#include <unordered_set>
#include <utility>

namespace collie {

template <typename T = void>
class Task;

namespace detail {

struct TaskPromiseBase {
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
  struct promise_type {
    SpawnRegistry* registry = nullptr;
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
    auto live = std::move(live_);
    live_.clear();
    for (void* a : live) std::coroutine_handle<Spawned::promise_type>::from_address(a).destroy();
  }
  // Takes ownership of `s` and runs it until its first suspension.
  void spawn(Spawned s) {
    s.handle.promise().registry = this;
    live_.insert(s.handle.address());
    s.handle.resume();
  }
  std::size_t live() const { return live_.size(); }

 private:
  friend struct Spawned::promise_type::FinalAwaiter;
  std::unordered_set<void*> live_;
};

inline void Spawned::promise_type::FinalAwaiter::await_suspend(std::coroutine_handle<promise_type> h) noexcept {
  SpawnRegistry* r = h.promise().registry;
  if (r) r->live_.erase(h.address());
  h.destroy();
}

}  // namespace collie
