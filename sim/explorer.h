// Explorer: drives the simulator's nondeterministic choices for systematic
// exploration (collie explore) instead of the seeded PRNG.
//
// In exploration mode time collapses (every cost is zero) and the simulator
// runs every resumption and send completion before any delivery, so every
// rank gets as far as it can before a message arrives. The only choice left
// is, at a receiver with messages pending from several senders, whose comes
// first: that decides any-source matching and every race between senders.
// Deliveries to different receivers commute, and order within one channel is
// restored by the core, so those orders are not explored (they are
// equivalent). A depth-first search over these choices, replaying each
// prefix from the start, enumerates every distinct order up to a bound.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace collie::sim {

class Explorer {
 public:
  // The choices to make first (a schedule); later choices take 0.
  explicit Explorer(std::vector<int> prefix = {}) : prefix_(std::move(prefix)) {}

  // Picks one of `labels` (what each alternative means) and records it.
  std::size_t choose(const std::vector<std::string>& labels) {
    const std::size_t pos = taken_.size();
    std::size_t c = pos < prefix_.size() ? static_cast<std::size_t>(prefix_[pos]) : 0;
    if (c >= labels.size()) c = 0;  // a schedule from another version of the program
    taken_.push_back(static_cast<int>(c));
    widths_.push_back(static_cast<int>(labels.size()));
    labels_.push_back(labels[c]);
    return c;
  }

  const std::vector<int>& taken() const { return taken_; }
  const std::vector<int>& widths() const { return widths_; }
  const std::vector<std::string>& labels() const { return labels_; }

  // The depth-first successor of the schedule just run, or false when the
  // whole space has been seen.
  bool next(std::vector<int>& prefix) const {
    for (std::size_t i = taken_.size(); i-- > 0;) {
      if (taken_[i] + 1 < widths_[i]) {
        prefix.assign(taken_.begin(), taken_.begin() + static_cast<long>(i));
        prefix.push_back(taken_[i] + 1);
        return true;
      }
    }
    return false;
  }

 private:
  std::vector<int> prefix_;
  std::vector<int> taken_, widths_;
  std::vector<std::string> labels_;
};

}  // namespace collie::sim
