// The program's output, merged in virtual-time order.
//
// Every line a rank writes (fd 1 or 2) is stamped with its rank and the
// rank's clock when it wrote it -- the time of the controller's last answer
// to it, since a rank that computes holds the clock -- and lines are printed
// in (time, rank, order written) order. A line is printed as soon as no rank
// can still write one that sorts before it: every other live rank's next
// line will carry at least its current stamp (a rank blocked in collie: at
// least the executor's clock now), so what is printed is always a prefix of
// the final order, and the output is the same bytes on every run of the
// same program and seed.
//
// Lines of processes that never became a rank (a launcher, a helper) have no
// virtual time: they are printed once their process ends, after the ranks'
// lines up to then, labelled with their process id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/executor.h"
#include "scenario/interpreter.h"

namespace collie::script {

struct OutputOptions {
  std::ostream* out = nullptr;  // where lines are printed as they become final (null: kept only)
  bool stamps = false;          // prefix "[rank R @ T ns] " (-v)
};

class OutputMerge {
 public:
  explicit OutputMerge(OutputOptions options) : options_(options) {}

  // The ranks whose lines are merged (once the world is known).
  void set_world(int world);
  // `rank` may still write lines stamped `stamp` or later. `blocked`: it
  // waits in collie, so its next line is stamped at least now().
  void set_stamp(int rank, Nanos stamp);
  void set_blocked(int rank, bool blocked);
  void set_clock(std::function<Nanos()> now) { now_ = std::move(now); }
  // The stamp of `rank`'s lines now (0 before its first answer).
  Nanos stamp(int rank) const {
    return rank >= 0 && static_cast<std::size_t>(rank) < stamp_.size() ? stamp_[static_cast<std::size_t>(rank)] : 0;
  }
  // `rank` writes nothing more.
  void set_done(int rank);

  // A line of rank `rank` written at its clock `stamp` (no newline).
  void add(int rank, Nanos stamp, std::string text);
  // A line of a process that is not a rank (`label`: "pid 123"), printed
  // at once.
  void add_other(const std::string& label, std::string text);

  // Prints what no rank can still precede.
  void flush_ready();
  // Prints everything (the run is over).
  void flush_all();

  // Every rank line, in the final order (for --json and tests).
  const std::vector<scenario::OutputLine>& lines() const { return printed_; }

 private:
  struct Key {
    Nanos time;
    int rank;
    std::uint64_t order;
    bool operator<(const Key& o) const {
      if (time != o.time) return time < o.time;
      if (rank != o.rank) return rank < o.rank;
      return order < o.order;
    }
  };
  void print(const scenario::OutputLine& l);

  OutputOptions options_;
  std::function<Nanos()> now_;
  std::map<Key, std::string> waiting_;
  std::vector<Nanos> stamp_;
  std::vector<char> blocked_, done_;
  std::uint64_t order_ = 0;
  std::vector<scenario::OutputLine> printed_;
};

}  // namespace collie::script
