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

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scenario/location.h"
#include "scenario/value.h"

namespace collie::scenario {

// An evaluation's variables: each of the five names an expression may use
// (kNames) set or not, written as a map's were --
//   Vars v = {{"rank", 1}, {"world", 4}};  v["i"] = 3;
// A parsed expression names its variables by slot, so an evaluation does
// no string comparison (init and update expressions run once per element).
class Vars {
 public:
  // Alphabetical: the order describe_vars lists them in.
  static constexpr std::array<std::string_view, 5> kNames = {"i", "j", "rank", "world", "x"};
  // The slot of `name` in kNames, or -1.
  static int slot(std::string_view name);

  Vars() = default;
  Vars(std::initializer_list<std::pair<std::string_view, Value>> init);
  // Sets `name` (0 until assigned). Throws std::logic_error for a name not
  // in kNames.
  Value& operator[](std::string_view name);
  // The variable in `slot`, or nullptr when it is not set.
  const Value* get(int slot) const { return (set_ >> slot) & 1u ? &values_[static_cast<std::size_t>(slot)] : nullptr; }
  bool empty() const { return set_ == 0; }

 private:
  std::array<Value, kNames.size()> values_{};
  std::uint8_t set_ = 0;  // bit k: slot k is set
};

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
  // The same evaluation on the expression's tree alone, without the int64
  // program (below): the reference eval is tested against.
  Value eval_on_tree(const Vars& vars) const;
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
  struct IntCode;

 private:
  std::shared_ptr<const Node> root_;
  // The expression as a stack program over int64, when it has no float,
  // no '/' and no '**': an evaluation whose variables and every step stay
  // int64 gives the tree's value from it; any other (a float variable, an
  // overflow, a division by zero, a branch Python would not take) is
  // evaluated on the tree, which says what Python would.
  std::shared_ptr<const IntCode> int_code_;
  std::string text_;
  Location where_;
};

// A number in a message as a person writes it: 1000000000000, not
// 1000000000000.000000; 2.5; 1e+20.
std::string as_written(double v);
// The same for a Value: an integer in full (9007199254740993), a float as above.
std::string as_written(const Value& v);

}  // namespace collie::scenario
