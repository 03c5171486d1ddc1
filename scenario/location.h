// Where something is in a scenario file, and the error that says so.
#pragma once

#include <stdexcept>
#include <string>

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

// A malformed scenario. what() is "FILE:LINE:COLUMN: error: MESSAGE".
class ScenarioError : public std::runtime_error {
 public:
  ScenarioError(Location where, const std::string& message)
      : std::runtime_error(where.str() + ": error: " + message), where_(std::move(where)), message_(message) {}
  const Location& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  Location where_;
  std::string message_;
};

}  // namespace collie::scenario
