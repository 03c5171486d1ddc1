#include "scenario/expr.h"

#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/tensor.h"

namespace collie::scenario {

struct Expr::Node {
  enum Kind { kNum, kVar, kUnary, kBinary, kCall } kind;
  Value num;
  std::string name;  // variable, operator or function
  std::vector<std::shared_ptr<const Node>> args;
  int depth = 1;     // levels of nodes below and including this one
};

namespace {

using NodeP = std::shared_ptr<const Expr::Node>;

class Parser {
 public:
  Parser(const std::string& s, const Location& where, const std::vector<std::string>& allowed)
      : s_(s), where_(where), allowed_(allowed) {}

  NodeP parse() {
    NodeP n = parse_ternary();
    skip();
    if (pos_ < s_.size()) fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    Location at = where_;
    at.column += static_cast<int>(pos_);
    throw ScenarioError(at, "in expression " + Expr::quoted(s_) + ": " + msg);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool word(const char* w) {
    skip();
    const std::size_t n = std::char_traits<char>::length(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    const bool alpha = std::isalpha(static_cast<unsigned char>(w[0]));
    if (alpha && pos_ + n < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_ + n])) || s_[pos_ + n] == '_'))
      return false;
    pos_ += n;
    return true;
  }
  // Every node is made here: its depth is bounded (evaluation, and freeing
  // the tree, recurse that deep).
  NodeP node(Expr::Node::Kind kind, std::string name, std::vector<NodeP> args) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = kind;
    n->name = std::move(name);
    for (const auto& a : args) n->depth = std::max(n->depth, a->depth + 1);
    n->args = std::move(args);
    if (n->depth > Expr::kMaxDepth)
      fail("nests deeper than " + std::to_string(Expr::kMaxDepth) + " levels (parentheses, operators and calls)");
    return n;
  }
  NodeP bin(const std::string& op, NodeP a, NodeP b) { return node(Expr::Node::kBinary, op, {std::move(a), std::move(b)}); }
  NodeP un(const std::string& op, NodeP a) { return node(Expr::Node::kUnary, op, {std::move(a)}); }
  // Parsing recursion, bounded before the tree is (a chain of unary minus
  // or of parentheses recurses here first).
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > Expr::kMaxDepth)
        p.fail("nests deeper than " + std::to_string(Expr::kMaxDepth) + " levels (parentheses, operators and calls)");
    }
    ~Nest() { --p.nesting_; }
  };
  // Python's conditional expression: a if cond else b (lowest precedence).
  NodeP parse_ternary() {
    NodeP a = parse_or();
    if (!word("if")) return a;
    NodeP cond = parse_or();
    if (!word("else")) fail("expected 'else' in 'a if condition else b'");
    Nest nest(*this);
    NodeP b = parse_ternary();
    return node(Expr::Node::kCall, "if", {std::move(cond), std::move(a), std::move(b)});
  }
  NodeP parse_or() {
    NodeP l = parse_and();
    while (word("or") || word("||")) l = bin("or", l, parse_and());
    return l;
  }
  NodeP parse_and() {
    NodeP l = parse_not();
    while (word("and") || word("&&")) l = bin("and", l, parse_not());
    return l;
  }
  NodeP parse_not() {
    if (word("not")) {
      Nest nest(*this);
      return un("not", parse_not());
    }
    skip();
    if (pos_ < s_.size() && s_[pos_] == '!' && (pos_ + 1 >= s_.size() || s_[pos_ + 1] != '=')) {
      ++pos_;
      Nest nest(*this);
      return un("not", parse_not());
    }
    return parse_cmp();
  }
  NodeP parse_cmp() {
    NodeP l = parse_add();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (word(op)) return bin(op, l, parse_add());
    }
    return l;
  }
  NodeP parse_add() {
    NodeP l = parse_mul();
    for (;;) {
      if (word("+")) l = bin("+", l, parse_mul());
      else if (word("-")) l = bin("-", l, parse_mul());
      else return l;
    }
  }
  NodeP parse_mul() {
    NodeP l = parse_unary();
    for (;;) {
      if (word("//")) l = bin("//", l, parse_unary());
      else if (word("*") ) {
        if (pos_ < s_.size() && s_[pos_] == '*') fail("'**' is written without spaces inside");
        l = bin("*", l, parse_unary());
      } else if (word("/")) l = bin("/", l, parse_unary());
      else if (word("%")) l = bin("%", l, parse_unary());
      else return l;
    }
  }
  NodeP parse_unary() {
    if (word("-")) {
      Nest nest(*this);
      return un("-", parse_unary());
    }
    if (word("+")) {
      Nest nest(*this);
      return parse_unary();
    }
    return parse_pow();
  }
  NodeP parse_pow() {
    NodeP base = parse_atom();
    skip();
    if (s_.compare(pos_, 2, "**") == 0) {
      pos_ += 2;
      Nest nest(*this);
      return bin("**", base, parse_unary());
    }
    return base;
  }
  NodeP parse_atom() {
    skip();
    if (pos_ >= s_.size()) fail("expected a value at the end");
    const char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      Nest nest(*this);
      NodeP n = parse_ternary();
      if (!word(")")) fail("expected ')'");
      return n;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      // Python's literals: integers exactly (0x1F, 1_000), floats as the
      // nearest double (a subnormal 5e-324 is a value, 1e400 is inf).
      std::size_t length = 0;
      std::string error;
      const std::optional<Value> v = scan_number(std::string_view(s_).substr(pos_), length, error);
      if (!v) fail(error.empty() ? "bad number" : error);
      pos_ += length;
      return constant(*v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      if (name == "True" || name == "true") return constant(Value(1));
      if (name == "False" || name == "false") return constant(Value(0));
      skip();
      if (pos_ < s_.size() && s_[pos_] == '(') {
        if (name != "min" && name != "max" && name != "abs") {
          pos_ = start;
          fail("unknown function '" + name + "' (known: min, max, abs)");
        }
        ++pos_;
        Nest nest(*this);
        std::vector<NodeP> args;
        args.push_back(parse_or());
        while (word(",")) args.push_back(parse_or());
        if (!word(")")) fail("expected ')' after the arguments of " + name);
        const std::size_t want = name == "abs" ? 1 : 2;
        if (args.size() != want) fail(name + " takes " + std::to_string(want) + " argument(s)");
        return node(Expr::Node::kCall, name, std::move(args));
      }
      bool ok = false;
      for (const auto& a : allowed_) ok = ok || a == name;
      if (!ok) {
        pos_ = start;
        std::string known;
        for (const auto& a : allowed_) known += (known.empty() ? "" : ", ") + a;
        fail("unknown variable '" + name + "' (here: " + (known.empty() ? "none" : known) + ")");
      }
      return node(Expr::Node::kVar, name, {});
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }
  static NodeP constant(Value v) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = Expr::Node::kNum;
    n->num = v;
    return n;
  }

  const std::string& s_;
  Location where_;
  const std::vector<std::string>& allowed_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

// What Python refuses to compute, thrown by eval_node and located by Expr::eval.
struct Refused {
  std::string why;
};

using Int = Value::Int;

[[noreturn]] void beyond_128_bits(const char* op) {
  throw Refused{std::string("the exact integer result of ") + op +
                " is beyond 128 bits (collie's integers are exact from -2**127 to 2**127 - 1)"};
}

Value boolean(bool b) { return Value(b ? 1 : 0); }

// Python's divmod of two floats (floatobject.c's float_divmod): floor
// division and a modulo with the divisor's sign. Requires b != 0.
void float_divmod(double a, double b, double& div_out, double& mod_out) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  div_out = floordiv;
  mod_out = mod;
}

// Python's int ** int for a non-negative exponent, exactly.
Value int_pow(Int base, Int exp) {
  if (base == 0) return Value(exp == 0 ? 1 : 0);
  if (base == 1) return Value(1);
  if (base == -1) return Value(exp % 2 == 0 ? 1 : -1);
  if (exp >= 128) beyond_128_bits("**");
  Int result = 1, b = base;
  for (Int e = exp;;) {
    if (e & 1)
      if (__builtin_mul_overflow(result, b, &result)) beyond_128_bits("**");
    e >>= 1;
    if (e == 0) break;
    if (__builtin_mul_overflow(b, b, &b)) beyond_128_bits("**");
  }
  return Value::integer(result);
}

// Python's float ** float (floatobject.c's float_pow), refusing what it
// refuses.
Value float_pow(double a, double b) {
  if (b == 0) return Value::real(1.0);
  if (std::isnan(a)) return Value::real(a == 1.0 ? 1.0 : a);
  if (a == 0 && b < 0 && std::isfinite(b)) throw Refused{"0.0 cannot be raised to a negative power"};
  if (a < 0 && std::isfinite(a) && std::isfinite(b) && b != std::floor(b))
    throw Refused{"a negative number to a fractional power is complex in Python, not a number here"};
  const double r = std::pow(a, b);
  if (std::isinf(r) && std::isfinite(a) && std::isfinite(b) && a != 0)
    throw Refused{"the result of ** is too large for a float (Python's OverflowError)"};
  return Value::real(r);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    const Int x = a.integer(), y = b.integer();
    Int r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) beyond_128_bits("+");
      return Value::integer(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) beyond_128_bits("-");
      return Value::integer(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) beyond_128_bits("*");
      return Value::integer(r);
    }
    if (op == "**") {
      if (y >= 0) return int_pow(x, y);
      if (x == 0) throw Refused{"0 cannot be raised to a negative power"};
      return float_pow(a.to_double(), b.to_double());  // Python: a float
    }
    if (y == 0) throw Refused{"division by zero (" + op + " 0)"};
    if (op == "/") {
      // True division: correctly rounded when the quotient is whole
      // (2**60 / 2) or both are doubles exactly; otherwise it may round
      // twice (Python rounds once).
      if (!(x == Value::kIntMin && y == -1) && x % y == 0) return Value::real(static_cast<double>(x / y));
      return Value::real(static_cast<double>(x) / static_cast<double>(y));
    }
    if (x == Value::kIntMin && y == -1) {
      if (op == "%") return Value(0);
      beyond_128_bits("//");
    }
    Int q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {  // floored, as Python's
      q -= 1;
      m += y;
    }
    return Value::integer(op == "//" ? q : m);
  }
  // A float on either side: both as floats (an integer rounded to nearest).
  const double x = a.to_double(), y = b.to_double();
  if (op == "+") return Value::real(x + y);
  if (op == "-") return Value::real(x - y);
  if (op == "*") return Value::real(x * y);
  if (op == "**") return float_pow(x, y);
  if (y == 0) throw Refused{"division by zero (" + op + " 0)"};
  if (op == "/") return Value::real(x / y);
  double div = 0, mod = 0;
  float_divmod(x, y, div, mod);
  return Value::real(op == "//" ? div : mod);
}

Value comparison(const std::string& op, const Value& a, const Value& b) {
  const std::optional<int> c = compare(a, b);
  if (!c) return boolean(op == "!=");  // NaN: unordered, unequal
  if (op == "==") return boolean(*c == 0);
  if (op == "!=") return boolean(*c != 0);
  if (op == "<") return boolean(*c < 0);
  if (op == "<=") return boolean(*c <= 0);
  if (op == ">") return boolean(*c > 0);
  return boolean(*c >= 0);  // >=
}

Value eval_node(const Expr::Node& n, const Vars& vars) {
  switch (n.kind) {
    case Expr::Node::kNum: return n.num;
    case Expr::Node::kVar: {
      auto it = vars.find(n.name);
      if (it == vars.end()) throw std::logic_error("variable '" + n.name + "' is not set");
      return it->second;
    }
    case Expr::Node::kUnary: {
      const Value a = eval_node(*n.args[0], vars);
      if (n.name == "not") return boolean(!a.truthy());
      if (!a.is_int()) return Value::real(-a.real());
      if (a.integer() == Value::kIntMin) beyond_128_bits("-");
      return Value::integer(-a.integer());
    }
    case Expr::Node::kCall: {
      const Value a = eval_node(*n.args[0], vars);
      if (n.name == "if") return eval_node(*n.args[a.truthy() ? 1 : 2], vars);
      if (n.name == "abs") {
        if (!a.is_int()) return Value::real(std::fabs(a.real()));
        if (a.integer() == Value::kIntMin) beyond_128_bits("abs");
        return Value::integer(a.integer() < 0 ? -a.integer() : a.integer());
      }
      const Value b = eval_node(*n.args[1], vars);
      // Python's min(a, b) is a unless b < a; max(a, b) is a unless b > a.
      const std::optional<int> c = compare(b, a);
      if (n.name == "min") return c && *c < 0 ? b : a;
      return c && *c > 0 ? b : a;
    }
    case Expr::Node::kBinary: {
      const std::string& op = n.name;
      const Value a = eval_node(*n.args[0], vars);
      // Python's and/or give an operand: 0 or 5 is 5, 2 and 3 is 3.
      if (op == "and") return a.truthy() ? eval_node(*n.args[1], vars) : a;
      if (op == "or") return a.truthy() ? a : eval_node(*n.args[1], vars);
      const Value b = eval_node(*n.args[1], vars);
      if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=") return comparison(op, a, b);
      return arithmetic(op, a, b);
    }
  }
  throw std::logic_error("unknown expression node");
}

// Whether `n` uses variable `name` (any variable when empty).
bool uses_var(const Expr::Node& n, const std::string& name) {
  if (n.kind == Expr::Node::kVar && (name.empty() || n.name == name)) return true;
  for (const auto& a : n.args)
    if (uses_var(*a, name)) return true;
  return false;
}

}  // namespace

Expr Expr::parse(const std::string& text, const Location& where, const std::vector<std::string>& allowed) {
  Expr e;
  Parser p(text, where, allowed);
  e.root_ = p.parse();
  e.text_ = text;
  e.where_ = where;
  return e;
}

Expr Expr::constant(Value v) {
  Expr e;
  auto n = std::make_shared<Node>();
  n->kind = Node::kNum;
  n->num = v;
  e.root_ = n;
  e.text_ = v.str();
  return e;
}

Value Expr::eval(const Vars& vars) const {
  if (!root_) return Value(0);
  try {
    return eval_node(*root_, vars);
  } catch (const Refused& r) {
    throw ScenarioError(where_, "in expression " + quoted(text_) + ": " + r.why +
                                    (vars.empty() ? "" : " with " + describe_vars(vars)));
  }
}

std::string Expr::quoted(const std::string& text) {
  return "'" + (text.size() <= 60 ? text : text.substr(0, 57) + "...") + "'";
}

std::string Expr::describe_vars(const Vars& vars) {
  std::string out;
  for (const auto& [name, value] : vars) out += (out.empty() ? "" : ", ") + name + "=" + value.str();
  return out;
}

bool Expr::is_constant() const { return !root_ || !uses_var(*root_, ""); }
bool Expr::uses(const std::string& name) const { return root_ && uses_var(*root_, name); }

std::string as_written(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e16) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return python_float(v);
}

std::string as_written(const Value& v) { return v.is_int() ? int_text(v.integer()) : as_written(v.real()); }

}  // namespace collie::scenario
