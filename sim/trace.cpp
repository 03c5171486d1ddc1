#include "sim/trace.h"

#include <algorithm>

namespace collie::sim {

namespace {

// Microseconds with three decimals from integer nanoseconds: no floating
// point, so the bytes never depend on the C library's formatting.
std::string us(Nanos ns) {
  if (ns < 0) ns = 0;
  std::string frac = std::to_string(ns % 1000);
  while (frac.size() < 3) frac.insert(frac.begin(), '0');
  return std::to_string(ns / 1000) + "." + frac;
}

std::string esc(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\n') {
      o += "\\n";
    } else if (c < 0x20) {
      o += ' ';
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

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
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  for (int r = 0; r < world_; ++r) {
    sep();
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << r << ",\"args\":{\"name\":\"rank " << r
        << "\"}}";
  }
  for (const Slice& s : slices_) {
    const Nanos stop = s.end < 0 ? end : s.end;
    sep();
    out << "{\"name\":\"" << esc(s.name) << "\",\"cat\":\"" << s.cat << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << s.rank
        << ",\"ts\":" << us(s.begin) << ",\"dur\":" << us(std::max<Nanos>(stop - s.begin, 0)) << ",\"args\":{\"op\":"
        << s.op;
    if (s.end < 0) out << ",\"unfinished\":true";
    if (!s.error.empty()) out << ",\"error\":\"" << esc(s.error) << "\"";
    out << "}}";
  }
  for (const Message& m : messages_) {
    sep();
    out << "{\"name\":\"" << esc(m.label) << "\",\"cat\":\"message\",\"ph\":\"s\",\"id\":" << m.id
        << ",\"pid\":0,\"tid\":" << m.src << ",\"ts\":" << us(m.sent) << "}";
    sep();
    out << "{\"name\":\"" << esc(m.label) << "\",\"cat\":\"message\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << m.id
        << ",\"pid\":0,\"tid\":" << m.dst << ",\"ts\":" << us(m.delivered) << "}";
  }
  for (const Instant& f : faults_) {
    sep();
    out << "{\"name\":\"" << esc(f.text) << "\",\"cat\":\"fault\",\"ph\":\"i\",\"s\":\"t\",\"pid\":0,\"tid\":"
        << std::max(f.rank, 0) << ",\"ts\":" << us(f.t) << "}";
  }
  out << "\n]}\n";
}

}  // namespace collie::sim
