// Making a completed send's buffer provably unused (conformance runs).
//
// core/transport.h: a send's payload stays valid until on_send_complete(),
// and not after -- a transport that reads it later (a zero-copy transport
// that completes early) delivers whatever the buffer holds by then. That
// shows only if the program happens to change the buffer first. So on
// conformance runs the core overwrites the part of a completed send's
// buffer that no other send still holds with a pattern of its own as the
// completion arrives, and puts the bytes back before anything of the
// sending rank runs again (a coroutine of its resumes, or a frame, a
// landing or a lost peer reaches its core): in between, nothing may read
// it, and a payload that arrives holding the pattern was read there.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace collie {

class Executor;

class SendScribble {
 public:
  // Scribbles for the rank whose executor is `owner`.
  explicit SendScribble(const Executor* owner) : owner_(owner) {}
  ~SendScribble();
  SendScribble(const SendScribble&) = delete;
  SendScribble& operator=(const SendScribble&) = delete;

  // Saves `region` and overwrites it with the pattern; `keepalive` (may be
  // null) owns its memory and is held until the bytes are back. Regions
  // scribbled and not yet restored never overlap.
  void scribble(std::span<std::byte> region, std::shared_ptr<void> keepalive);
  // Puts every scribbled region back.
  void restore();
  bool pending() const { return !saved_.empty(); }
  const Executor* owner() const { return owner_; }

 private:
  struct Saved {
    std::byte* at;
    std::vector<std::byte> bytes;
    std::shared_ptr<void> keepalive;
  };
  const Executor* owner_;
  std::vector<Saved> saved_;
};

// Restores what the rank of `executor` has scribbled: called as one of its
// coroutines resumes. Nothing to do (one load) while nothing is scribbled.
void restore_scribbles(const Executor* executor);

// Whether `payload` holds eight or more bytes of the pattern in a row:
// bytes read from a send buffer after its completion. Random data does so
// with a probability of about one in 2^64 per byte.
bool holds_scribble(std::span<const std::byte> payload);

}  // namespace collie
