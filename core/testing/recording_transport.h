// A transport that only records what the core hands it, for tests that
// drive a MessageEngine by hand: they play the network (on_frame,
// on_send_complete) themselves, in whatever order the test needs.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <span>
#include <string>

#include "core/transport.h"
#include "core/work.h"

namespace collie::testing {

class RecordingTransport final : public Transport {
 public:
  struct Posted {
    FrameHeader header;
    std::span<const std::byte> payload;  // the sender's memory, as handed over
    void* cookie = nullptr;
  };
  RecordingTransport(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void attach(FrameSink*) override {}
  void post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) override {
    sent.push_back(Posted{h, payload, cookie});
  }
  void schedule(std::coroutine_handle<>) override {}
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<>) override {}
  void schedule_at(Nanos, std::coroutine_handle<>) override {}
  bool run_until(const std::function<bool()>&, std::optional<Nanos>) override { return true; }
  Nanos now() const override { return 0; }
  std::deque<Posted> sent;

 private:
  int rank_, world_;
};

// How an op the test drove ended: its error's text, "(no error)" if it
// succeeded or has not finished.
inline std::string error_of(const std::shared_ptr<WorkState>& w) {
  if (!w->completed || !w->error) return "(no error)";
  try {
    std::rethrow_exception(w->error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace collie::testing
