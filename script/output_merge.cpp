#include "script/output_merge.h"

#include <algorithm>

namespace collie::script {

void OutputMerge::set_world(int world) {
  const auto n = static_cast<std::size_t>(world);
  stamp_.assign(n, 0);
  blocked_.assign(n, 0);
  done_.assign(n, 0);
}

void OutputMerge::set_stamp(int rank, Nanos stamp) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= stamp_.size()) return;
  stamp_[static_cast<std::size_t>(rank)] = std::max(stamp_[static_cast<std::size_t>(rank)], stamp);
}

void OutputMerge::set_blocked(int rank, bool blocked) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= blocked_.size()) return;
  blocked_[static_cast<std::size_t>(rank)] = blocked ? 1 : 0;
}

void OutputMerge::set_done(int rank) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= done_.size()) return;
  done_[static_cast<std::size_t>(rank)] = 1;
}

void OutputMerge::add(int rank, Nanos stamp, std::string text) {
  waiting_.emplace(Key{stamp, rank, order_++}, std::move(text));
}

void OutputMerge::add_other(const std::string& label, std::string text) {
  if (!options_.out) return;
  if (options_.stamps) *options_.out << "[" << label << "] ";
  *options_.out << text << "\n";
  options_.out->flush();
}

void OutputMerge::print(const scenario::OutputLine& l) {
  if (options_.out) {
    if (options_.stamps) *options_.out << "[rank " << l.rank << " @ " << l.time << " ns] ";
    *options_.out << l.text << "\n";
  }
  printed_.push_back(l);
}

void OutputMerge::flush_ready() {
  const Nanos now = now_ ? now_() : 0;
  bool any = false;
  while (!waiting_.empty()) {
    const auto& [key, text] = *waiting_.begin();
    bool ready = true;
    for (std::size_t k = 0; k < stamp_.size() && ready; ++k) {
      const int rank = static_cast<int>(k);
      if (rank == key.rank || done_[k]) continue;
      const Nanos bound = blocked_[k] ? std::max(stamp_[k], now) : stamp_[k];
      // Rank k's next line sorts at (bound, k) or later.
      ready = key.time < bound || (key.time == bound && key.rank < rank);
    }
    if (!ready) break;
    print(scenario::OutputLine{key.rank, key.time, text});
    waiting_.erase(waiting_.begin());
    any = true;
  }
  if (any && options_.out) options_.out->flush();
}

void OutputMerge::flush_all() {
  for (const auto& [key, text] : waiting_) print(scenario::OutputLine{key.rank, key.time, text});
  waiting_.clear();
  if (options_.out) options_.out->flush();
}

}  // namespace collie::script
