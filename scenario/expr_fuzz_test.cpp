// Fuzzing the expression parser and evaluator (built with AddressSanitizer
// and UndefinedBehaviorSanitizer, see cmake/FuzzTests.cmake): random
// expressions from the grammar, then mutated byte by byte, must parse or be
// refused with a ScenarioError located inside the expression -- never
// another exception, a crash, a stack overflow or undefined behaviour (a
// double converted to an integer it does not fit, a shift too far). Those
// that parse are evaluated with extreme variable values: a value or a
// located ScenarioError.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "scenario/expr.h"

namespace collie::scenario {
namespace {

const std::vector<std::string> kVariables = {"rank", "world", "i"};
const Location kWhere{"e.yaml", 4, 11};

// An expression of the grammar, at most `depth` levels deep.
std::string gen_expr(int depth) {
  static const std::vector<std::string> atoms = {
      "0", "1", "-1", "2", "3.5", "1e308", "1e400", "5e-324", "2.2250738585072014e-308", "9223372036854775807",
      "18446744073709551616", "0.1", "1_000", "0x10", "nan", "inf", "rank", "world", "i", "nosuch", "True", ".5", "5.",
      "170141183460469231731687303715884105727", "170141183460469231731687303715884105728", "0x7fffffffffffffff",
      "9007199254740993", "255", "256", "-129", "0o777", "0b1_0", "1__0", "007", "1e", "0x"};
  static const std::vector<std::string> binary = {"+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=",
                                                  ">", ">=", "and", "or", "&&", "||"};
  if (depth <= 0) return *rc::gen::elementOf(atoms);
  switch (*rc::gen::inRange(0, 7)) {
    case 0: return *rc::gen::elementOf(atoms);
    case 1: return gen_expr(depth - 1) + " " + *rc::gen::elementOf(binary) + " " + gen_expr(depth - 1);
    case 2: return "(" + gen_expr(depth - 1) + ")";
    case 3: return *rc::gen::element<std::string>("-", "not ", "!", "- -") + gen_expr(depth - 1);
    case 4: {
      const std::string f = *rc::gen::element<std::string>("min", "max", "abs", "pow", "min");
      std::string args = gen_expr(depth - 1);
      for (int k = *rc::gen::inRange(0, 3); k > 0; --k) args += ", " + gen_expr(depth - 1);
      return f + "(" + args + ")";
    }
    case 5: return gen_expr(depth - 1) + " if " + gen_expr(depth - 1) + " else " + gen_expr(depth - 1);
    default: return gen_expr(depth - 1) + *rc::gen::elementOf(binary) + gen_expr(depth - 1);
  }
}

std::string mutate(std::string text) {
  for (int k = *rc::gen::inRange(0, 4); k > 0; --k) {
    const std::size_t pos = *rc::gen::inRange<std::size_t>(0, text.size() + 1);
    switch (*rc::gen::inRange(0, 4)) {
      case 0:
        if (pos < text.size()) text.erase(pos, *rc::gen::inRange<std::size_t>(1, 6));
        break;
      case 1:
        text.insert(pos, *rc::gen::element<std::string>("(", ")", ",", " if ", " else ", "**", "e", ".", "\xff",
                                                        "\xc3\xa9", "\t", "'", "#"));
        break;
      case 2:
        text.insert(pos, std::string(1, static_cast<char>(*rc::gen::inRange(1, 256))));
        break;
      default:
        break;
    }
  }
  return text;
}

Value gen_value() {
  if (*rc::gen::arbitrary<bool>())
    return Value(*rc::gen::element<std::int64_t>(0, 1, -1, 7, INT64_MAX, INT64_MIN, (std::int64_t{1} << 53) + 1, 255, -128));
  return Value::real(*rc::gen::element(0.0, -0.0, 1.0, -1.0, 7.0, 1e308, -1e308, 4.9e-324, 9.3e18, -9.3e18,
                                       std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()));
}

RC_GTEST_PROP(ExprFuzz, ExpressionsParseOrAreRefusedInsideTheExpression, ()) {
  const std::string text = mutate(gen_expr(*rc::gen::inRange(0, 7)));
  Expr e;
  try {
    e = Expr::parse(text, kWhere, kVariables);
  } catch (const ScenarioError& err) {
    RC_ASSERT(err.where().file == "e.yaml");
    RC_ASSERT(err.where().line == 4);
    // Inside the expression (columns count from where it starts).
    RC_ASSERT(err.where().column >= kWhere.column);
    RC_ASSERT(err.where().column <= kWhere.column + static_cast<int>(text.size()) + 1);
    return;
  } catch (const std::exception& err) {
    RC_FAIL(std::string("parsing raised something other than ScenarioError: ") + err.what() + "\n  " + text);
  }
  RC_TAG("parsed");
  for (int k = 0; k < 3; ++k) {
    const Vars vars = {{"rank", gen_value()}, {"world", gen_value()}, {"i", gen_value()}};
    try {
      (void)e.eval(vars);
    } catch (const ScenarioError& err) {
      RC_ASSERT(std::string(err.what()).rfind("e.yaml:4:", 0) == 0);
    } catch (const std::exception& err) {
      RC_FAIL(std::string("evaluating raised something other than ScenarioError: ") + err.what() + "\n  " + text);
    }
  }
}

// Nesting around the limit, by every construct that nests: refused with a
// location past the limit, never a stack overflow.
RC_GTEST_PROP(ExprFuzz, NestingNearTheLimitParsesOrIsRefused, ()) {
  const int depth = *rc::gen::inRange(Expr::kMaxDepth - 5, Expr::kMaxDepth + 5);
  const std::string open = *rc::gen::element<std::string>("(", "-", "not ", "abs(", "min(1, ", "1 + (");
  const bool closes = open.find('(') != std::string::npos;
  std::string text;
  for (int k = 0; k < depth; ++k) text += open;
  text += "1";
  if (closes) text += std::string(static_cast<std::size_t>(depth), ')');
  try {
    (void)Expr::parse(text, kWhere, kVariables).eval({{"rank", 0}, {"world", 1}, {"i", 0}});
  } catch (const ScenarioError& err) {
    RC_ASSERT(err.where().line == 4);
  }
}

}  // namespace
}  // namespace collie::scenario
