// Expressions in scenario files: initial values ("rank + i"), peers
// ("(rank + 1) % world"), conditions ("rank == 0 or rank == 3").
//
// Grammar (Python-like): numbers; variables; unary - + and not; ** ; * / //
// % ; + - ; comparisons == != < <= > >= ; and, or (also &&, ||, !);
// parentheses; calls min(a, b), max(a, b), abs(a); a if cond else b.
// Values are Python's (scenario/value.h): integers stay exact integers
// (2**60 + 1 is 1152921504606846977), a float makes the result a float,
// / is true division (a float), // and % are floored, int ** negative int
// is a float; and/or give an operand (0 or 5 is 5), comparisons and not
// give 0 or 1; a condition holds when its value is not 0. As in Python,
// dividing by zero (/ // %), 0 ** -n, a negative float to a fractional
// power (complex in Python), a float ** too large for a double are errors,
// not values -- and so is an integer beyond 128 bits (value.h): eval()
// throws a ScenarioError at the expression's location naming the
// variables' values. An expression nests at most kMaxDepth levels
// (parentheses, operators, calls): deeper ones are refused when parsed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scenario/location.h"
#include "scenario/value.h"

namespace collie::scenario {

// An evaluation's variables: rank, world, i, j, x.
using Vars = std::map<std::string, Value>;

class Expr {
 public:
  static constexpr int kMaxDepth = 200;
  Expr() = default;
  // Parses `text`; throws ScenarioError at `where` (column adjusted to the
  // offending character) if it is malformed or names a variable outside
  // `allowed`.
  static Expr parse(const std::string& text, const Location& where, const std::vector<std::string>& allowed);
  static Expr constant(Value v);

  bool valid() const { return root_ != nullptr; }
  const std::string& text() const { return text_; }
  // Evaluates with the given variables (every variable it uses must be set).
  // Throws ScenarioError at the expression for what Python refuses.
  Value eval(const Vars& vars) const;
  const Location& where() const { return where_; }
  // How errors quote an expression: its text, cut to 60 characters.
  static std::string quoted(const std::string& text);
  // How errors show the variables an evaluation had: "i=3, rank=1".
  static std::string describe_vars(const Vars& vars);
  // True when the expression uses no variables.
  bool is_constant() const;
  // True when it uses variable `name`.
  bool uses(const std::string& name) const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
  Location where_;
};

// A number in a message as a person writes it: 1000000000000, not
// 1000000000000.000000; 2.5; 1e+20.
std::string as_written(double v);
// The same for a Value: an integer in full (9007199254740993), a float as above.
std::string as_written(const Value& v);

}  // namespace collie::scenario
