// TraceRecorder: what happened in a simulated run, as a Chrome trace-event
// JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open: one
// track per rank, a slice per op and per algorithm step, a flow arrow per
// message from sender to receiver, an instant per injected fault. The file
// is a function of the run alone: the same seed gives the same bytes.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/transport.h"

namespace collie::sim {

class TraceRecorder {
 public:
  explicit TraceRecorder(int world_size) : world_(world_size) {}

  void op_begin(int rank, std::uint64_t id, const std::string& name, Nanos t);
  void op_end(int rank, std::uint64_t id, const std::string& error, Nanos t);
  void step(int rank, std::uint64_t id, const std::string& step, Nanos t);
  void message(std::uint64_t id, int src, int dst, Nanos sent, Nanos delivered, const std::string& label);
  void fault(int rank, Nanos t, const std::string& text);

  // Writes the trace; ops and steps still open are closed at `end`.
  void write_chrome_json(std::ostream& out, Nanos end) const;

 private:
  struct Slice {
    int rank;
    std::string name, cat, error;
    Nanos begin, end = -1;
    std::uint64_t op;  // the op a step belongs to
  };
  int world_;
  std::vector<Slice> slices_;
  std::map<std::pair<int, std::uint64_t>, std::size_t> open_ops_;    // (rank, op id) -> slice
  std::map<std::pair<int, std::uint64_t>, std::size_t> open_steps_;  // (rank, op id) -> slice
  struct Message {
    std::uint64_t id;
    int src, dst;
    Nanos sent, delivered;
    std::string label;
  };
  std::vector<Message> messages_;
  struct Instant {
    int rank;
    Nanos t;
    std::string text;
  };
  std::vector<Instant> faults_;
};

}  // namespace collie::sim
