// The core's calls into a transport that must not call back.
//
// core/executor.h and core/transport.h: every callback into the core -- a
// FrameSink method, a coroutine resumed -- comes from run_until()'s own
// loop, never from inside post_send(), schedule(), schedule_at(),
// schedule_after_compute(), copy(), reduce(), finish_average() or
// allocate(). The core marks each such call with a
// TransportCall; whatever arrives while one is in progress on this thread
// broke that contract. The core then never acts on the callback as if it
// were legitimate, and never crashes on it: a FrameSink method is ignored
// and reported, a coroutine (already running: the transport resumed it) is
// noted against the executor that resumed it, for its rank's message engine
// to fail every op with at its next callback and for the run to fail with
// (core/local_world.h).
#pragma once

#include <string>
#include <vector>

namespace collie {

class Executor;

class TransportCall {
 public:
  // `what` names the call as a report shows it ("post_send()"); a string
  // literal.
  explicit TransportCall(const char* what) noexcept;
  ~TransportCall();
  TransportCall(const TransportCall&) = delete;
  TransportCall& operator=(const TransportCall&) = delete;

  // The innermost call in progress on this thread, or null.
  static const char* current() noexcept;

 private:
  const char* prev_;
};

// Called by every awaiter as its coroutine resumes, once current() said a
// call is in progress: `executor` resumed the coroutine inside it. Notes
// that for `executor` and returns the report ("it resumed a coroutine
// inside schedule() (awaiting recv #1 on world); ...").
std::string note_resumed_inside_call(const Executor* executor, const std::string& awaiting);
// The resumptions noted against `executor` so far, and forgets them.
std::vector<std::string> take_resumptions_inside_calls(const Executor* executor);
// Whether any resumption is noted on this thread (every callback asks).
bool resumptions_inside_calls_noted() noexcept;

}  // namespace collie
