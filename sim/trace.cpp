#include "sim/trace.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace collie::sim {

namespace {

// Microseconds from integer nanoseconds (nlohmann writes doubles with its
// own shortest round-trip algorithm: the bytes do not depend on the C
// library).
double us(Nanos ns) { return static_cast<double>(std::max<Nanos>(ns, 0)) / 1000.0; }

}  // namespace

void TraceRecorder::op_begin(int rank, std::uint64_t id, const std::string& name, Nanos t) {
  open_ops_[{rank, id}] = slices_.size();
  slices_.push_back(Slice{rank, name, "op", "", t, -1, id});
}

void TraceRecorder::step(int rank, std::uint64_t id, const std::string& name, Nanos t) {
  auto it = open_steps_.find({rank, id});
  if (it != open_steps_.end()) slices_[it->second].end = t;
  open_steps_[{rank, id}] = slices_.size();
  slices_.push_back(Slice{rank, name, "step", "", t, -1, id});
}

void TraceRecorder::op_end(int rank, std::uint64_t id, const std::string& error, Nanos t) {
  auto s = open_steps_.find({rank, id});
  if (s != open_steps_.end()) {
    slices_[s->second].end = t;
    open_steps_.erase(s);
  }
  auto it = open_ops_.find({rank, id});
  if (it == open_ops_.end()) return;
  slices_[it->second].end = t;
  slices_[it->second].error = error;
  open_ops_.erase(it);
}

void TraceRecorder::message(std::uint64_t id, int src, int dst, Nanos sent, Nanos delivered, const std::string& label) {
  messages_.push_back(Message{id, src, dst, sent, delivered, label});
}

void TraceRecorder::fault(int rank, Nanos t, const std::string& text) { faults_.push_back(Instant{rank, t, text}); }

void TraceRecorder::write_chrome_json(std::ostream& out, Nanos end) const {
  using json = nlohmann::json;
  json events = json::array();
  for (int r = 0; r < world_; ++r)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
  for (const Slice& s : slices_) {
    const Nanos stop = s.end < 0 ? end : s.end;
    json args = {{"op", s.op}};
    if (s.end < 0) args["unfinished"] = true;
    if (!s.error.empty()) args["error"] = s.error;
    events.push_back({{"name", s.name}, {"cat", s.cat}, {"ph", "X"}, {"pid", 0}, {"tid", s.rank}, {"ts", us(s.begin)},
                      {"dur", us(std::max<Nanos>(stop - s.begin, 0))}, {"args", std::move(args)}});
  }
  for (const Message& m : messages_) {
    events.push_back({{"name", m.label}, {"cat", "message"}, {"ph", "s"}, {"id", m.id}, {"pid", 0}, {"tid", m.src},
                      {"ts", us(m.sent)}});
    events.push_back({{"name", m.label}, {"cat", "message"}, {"ph", "f"}, {"bp", "e"}, {"id", m.id}, {"pid", 0},
                      {"tid", m.dst}, {"ts", us(m.delivered)}});
  }
  for (const Instant& f : faults_)
    events.push_back({{"name", f.text}, {"cat", "fault"}, {"ph", "i"}, {"s", "t"}, {"pid", 0}, {"tid", std::max(f.rank, 0)},
                      {"ts", us(f.t)}});
  const json trace = {{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)}};
  out << trace.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace collie::sim
