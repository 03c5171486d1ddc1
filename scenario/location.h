// Where something is in a scenario file, and the error that says so.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace collie::scenario {

struct Location {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string str() const {  // "file:line:column", or "file" where no line is known
    if (line <= 0) return file;
    return file + ":" + std::to_string(line) + ":" + std::to_string(column);
  }
};

// A malformed scenario. what() is "FILE:LINE:COLUMN: error: MESSAGE" --
// or, for a file with several problems, one such line per problem, in the
// order they were found (where() and message() are then the first's).
class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(Location where, const std::string& message)
      : std::runtime_error(where.str() + ": error: " + message), where_(std::move(where)), message_(message) {}
  // Every problem of `all` (at least one), as one error.
  explicit ScenarioError(const std::vector<ScenarioError>& all)
      : std::runtime_error(joined(all)), where_(all.front().where_), message_(all.front().message_),
        problems_(all.size()) {}
  const Location& where() const { return where_; }
  const std::string& message() const { return message_; }
  std::size_t problems() const { return problems_; }  // lines of what()

 private:
  static std::string joined(const std::vector<ScenarioError>& all) {
    std::string s;
    for (const auto& e : all) s += (s.empty() ? "" : "\n") + std::string(e.what());
    return s;
  }
  Location where_;
  std::string message_;
  std::size_t problems_ = 1;
};

// Collects the problems of one file so that each is reported, not only the
// first: attempt() runs a part of the checks (one step, one tensor) and
// keeps the ScenarioError it throws; rethrow() throws every problem kept as
// one ScenarioError. At most kMax are kept: then a last line says so and
// later attempts do nothing (they report false), so that the checks come
// quickly to their rethrow().
class ScenarioErrors {
 public:
  static constexpr std::size_t kMax = 50;
  // Runs f(); false if it threw a ScenarioError (kept), or if kMax
  // problems were kept already (f does not run).
  template <typename F>
  bool attempt(F&& f) {
    if (stopped_) return false;
    try {
      f();
      return true;
    } catch (const ScenarioError& e) {
      keep(e);
      return false;
    }
  }
  void keep(const ScenarioError& e) {
    if (stopped_) return;
    all_.push_back(e);
    if (count() >= kMax) {
      all_.emplace_back(Location{all_.front().where().file, 0, 0},
                        "stopped after " + std::to_string(kMax) + " problems; there may be more");
      stopped_ = true;
    }
  }
  bool empty() const { return all_.empty(); }
  std::size_t count() const {
    std::size_t n = 0;
    for (const auto& e : all_) n += e.problems();
    return n;
  }
  // Throws what was kept (nothing when empty).
  void rethrow() const {
    if (all_.empty()) return;
    if (all_.size() == 1) throw all_.front();
    throw ScenarioError(all_);
  }

 private:
  std::vector<ScenarioError> all_;
  bool stopped_ = false;
};

}  // namespace collie::scenario
