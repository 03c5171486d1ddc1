// Expressions in scenario files: initial values ("rank + i"), peers
// ("(rank + 1) % world"), conditions ("rank == 0 or rank == 3").
//
// Grammar (Python-like): numbers; variables; unary - and not; ** ; * / // % ;
// + - ; comparisons == != < <= > >= ; and, or (also &&, ||, !); parentheses;
// calls min(a, b), max(a, b), abs(a); a if cond else b. % and // are Python's (floored). All
// arithmetic is in double; a condition holds when its value is not 0.
// As in Python, dividing by zero (/ // %) and 0 ** -n are errors, not
// values: eval() throws a ScenarioError at the expression's location naming
// the variables' values. An expression nests at most kMaxDepth levels
// (parentheses, operators, calls): deeper ones are refused when parsed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scenario/location.h"

namespace collie::scenario {

class Expr {
 public:
  static constexpr int kMaxDepth = 200;
  Expr() = default;
  // Parses `text`; throws ScenarioError at `where` (column adjusted to the
  // offending character) if it is malformed or names a variable outside
  // `allowed`.
  static Expr parse(const std::string& text, const Location& where, const std::vector<std::string>& allowed);
  static Expr constant(double v);

  bool valid() const { return root_ != nullptr; }
  const std::string& text() const { return text_; }
  // Evaluates with the given variables (every variable it uses must be set).
  // Throws ScenarioError at the expression for what Python refuses.
  double eval(const std::map<std::string, double>& vars) const;
  const Location& where() const { return where_; }
  // How errors quote an expression: its text, cut to 60 characters.
  static std::string quoted(const std::string& text);
  // How errors show the variables an evaluation had: "i=3, rank=1".
  static std::string describe_vars(const std::map<std::string, double>& vars);
  // True when the expression uses no variables.
  bool is_constant() const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
  Location where_;
};

// A number in a message as a person writes it: 1000000000000, not
// 1000000000000.000000; 2.5; 1e+20.
std::string as_written(double v);

}  // namespace collie::scenario
