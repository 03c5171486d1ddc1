// Expressions in scenario files: initial values ("rank + i"), peers
// ("(rank + 1) % world"), conditions ("rank == 0 or rank == 3").
//
// Grammar (Python-like): numbers; variables; unary - and not; ** ; * / // % ;
// + - ; comparisons == != < <= > >= ; and, or (also &&, ||, !); parentheses;
// calls min(a, b), max(a, b), abs(a); a if cond else b. % and // are Python's (floored). All
// arithmetic is in double; a condition holds when its value is not 0.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scenario/location.h"

namespace collie::scenario {

class Expr {
 public:
  Expr() = default;
  // Parses `text`; throws ScenarioError at `where` (column adjusted to the
  // offending character) if it is malformed or names a variable outside
  // `allowed`.
  static Expr parse(const std::string& text, const Location& where, const std::vector<std::string>& allowed);
  static Expr constant(double v);

  bool valid() const { return root_ != nullptr; }
  const std::string& text() const { return text_; }
  // Evaluates with the given variables (every variable it uses must be set).
  double eval(const std::map<std::string, double>& vars) const;
  // True when the expression uses no variables.
  bool is_constant() const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
};

}  // namespace collie::scenario
