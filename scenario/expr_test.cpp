// Expr::eval runs an expression of integers as an int64 program when it
// can; it must give what the tree gives (Expr::eval_on_tree) for every
// expression and variables -- the same value, or the same located error --
// including at int64's edges, where the program hands back to the tree.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "scenario/expr.h"

namespace collie::scenario {
namespace {

const std::vector<std::string> kVariables = {"i", "j", "rank", "world", "x"};
const Location kWhere{"e.yaml", 2, 9};

std::string gen_int_expr(int depth) {
  static const std::vector<std::string> atoms = {"0", "1", "-1", "2", "3", "7", "10", "100", "i", "j", "rank",
                                                 "world", "x", "9223372036854775807", "4611686018427387904",
                                                 "3037000500", "True"};
  static const std::vector<std::string> binary = {"+", "-", "*", "//", "%", "==", "!=", "<", "<=",
                                                  ">", ">=", "and", "or"};
  if (depth <= 0) return *rc::gen::elementOf(atoms);
  switch (*rc::gen::inRange(0, 7)) {
    case 0: return *rc::gen::elementOf(atoms);
    case 1:
    case 2: return "(" + gen_int_expr(depth - 1) + " " + *rc::gen::elementOf(binary) + " " + gen_int_expr(depth - 1) + ")";
    case 3: return "(" + *rc::gen::element<std::string>("-", "not ", "+") + "(" + gen_int_expr(depth - 1) + "))";
    case 4: return *rc::gen::element<std::string>("min", "max") + "(" + gen_int_expr(depth - 1) + ", " + gen_int_expr(depth - 1) + ")";
    case 5: return "abs(" + gen_int_expr(depth - 1) + ")";
    default:
      return "(" + gen_int_expr(depth - 1) + " if " + gen_int_expr(depth - 1) + " else " + gen_int_expr(depth - 1) + ")";
  }
}

Value gen_var() {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  switch (*rc::gen::inRange(0, 6)) {
    case 0: return Value(*rc::gen::inRange<std::int64_t>(-3, 4));
    case 1: return Value(*rc::gen::inRange<std::int64_t>(0, 1 << 20));
    case 2: return Value(*rc::gen::elementOf(std::vector<std::int64_t>{kMax, kMin, kMax - 1, kMin + 1}));
    case 3: return Value::integer(static_cast<Value::Int>(kMax) + *rc::gen::inRange<std::int64_t>(1, 3));
    case 4: return Value::real(*rc::gen::element(0.5, -2.0, 3.0));
    default: return Value(*rc::gen::arbitrary<std::int64_t>());
  }
}

// The value, or the error's text.
std::string outcome(const Expr& e, const Vars& v, bool tree) {
  try {
    const Value r = tree ? e.eval_on_tree(v) : e.eval(v);
    return (r.is_int() ? "int " : "float ") + r.str();
  } catch (const ScenarioError& err) {
    return std::string("error ") + err.what();
  }
}

RC_GTEST_PROP(Expr, TheInt64ProgramGivesWhatTheTreeGives, ()) {
  const std::string text = gen_int_expr(*rc::gen::inRange(0, 6));
  const Expr e = Expr::parse(text, kWhere, kVariables);
  Vars v;
  for (const std::string& name : kVariables) v[name] = gen_var();
  RC_ASSERT(outcome(e, v, false) == outcome(e, v, true));
}

TEST(Expr, Int64EdgesHandBackToTheTree) {
  const auto ev = [](const std::string& text, Value i) {
    return Expr::parse(text, kWhere, kVariables).eval({{"i", i}}).str();
  };
  const Value max = Value(std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(ev("i + 1", max), "9223372036854775808");
  EXPECT_EQ(ev("i * i", max), "85070591730234615847396907784232501249");
  EXPECT_EQ(ev("-i - 2", max), "-9223372036854775809");
  EXPECT_EQ(ev("(-i - 1) // -1", max), "9223372036854775808");
  EXPECT_EQ(ev("-7 // i", Value(2)), "-4");
  EXPECT_EQ(ev("-7 % i", Value(2)), "1");
  EXPECT_EQ(ev("i + 1", Value::real(0.5)), "1.5");
  EXPECT_EQ(ev("i == 0 or 10 // i", Value(0)), "1");
  EXPECT_THROW(ev("i == 1 or 10 // i", Value(0)), ScenarioError);
}

}  // namespace
}  // namespace collie::scenario
