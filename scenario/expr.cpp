#include "scenario/expr.h"

#include <cctype>
#include <optional>
#include <cstdint>
#include <climits>
#include <array>
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
  // What an operator or function node computes: `name` resolved when the
  // node is made, so that evaluating compares no strings.
  enum class Op : std::uint8_t {
    kNone, kNot, kNeg, kIf, kAbs, kMin, kMax, kAnd, kOr,
    kEq, kNe, kLt, kLe, kGt, kGe, kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow,
  };
  Value num;
  std::string name;  // variable, operator or function
  Op op = Op::kNone;
  int slot = -1;     // a variable's slot in Vars::kNames
  std::vector<std::shared_ptr<const Node>> args;
  int depth = 1;     // levels of nodes below and including this one
};

int Vars::slot(std::string_view name) {
  for (std::size_t k = 0; k < kNames.size(); ++k)
    if (kNames[k] == name) return static_cast<int>(k);
  return -1;
}

Vars::Vars(std::initializer_list<std::pair<std::string_view, Value>> init) {
  for (const auto& [name, value] : init) (*this)[name] = value;
}

Value& Vars::operator[](std::string_view name) {
  const int k = slot(name);
  if (k < 0) throw std::logic_error("'" + std::string(name) + "' is not an expression variable");
  set_ = static_cast<std::uint8_t>(set_ | (1u << k));
  return values_[static_cast<std::size_t>(k)];
}

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
    if (kind == Expr::Node::kVar) {
      n->slot = Vars::slot(n->name);
      if (n->slot < 0) throw std::logic_error("expression variable '" + n->name + "' has no slot in Vars");
    } else {
      n->op = op_of(kind, n->name);
    }
    for (const auto& a : args) n->depth = std::max(n->depth, a->depth + 1);
    n->args = std::move(args);
    if (n->depth > Expr::kMaxDepth)
      fail("nests deeper than " + std::to_string(Expr::kMaxDepth) + " levels (parentheses, operators and calls)");
    return n;
  }
  static Expr::Node::Op op_of(Expr::Node::Kind kind, const std::string& name) {
    using Op = Expr::Node::Op;
    if (kind == Expr::Node::kUnary) return name == "not" ? Op::kNot : Op::kNeg;
    static const std::pair<const char*, Op> kOps[] = {
        {"if", Op::kIf},   {"abs", Op::kAbs}, {"min", Op::kMin}, {"max", Op::kMax}, {"and", Op::kAnd},
        {"or", Op::kOr},   {"==", Op::kEq},   {"!=", Op::kNe},   {"<", Op::kLt},    {"<=", Op::kLe},
        {">", Op::kGt},    {">=", Op::kGe},   {"+", Op::kAdd},   {"-", Op::kSub},   {"*", Op::kMul},
        {"/", Op::kDiv},   {"//", Op::kFloorDiv}, {"%", Op::kMod}, {"**", Op::kPow},
    };
    for (const auto& [text, op] : kOps)
      if (name == text) return op;
    return Op::kNone;
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

using Op = Expr::Node::Op;

// a op b for +, -, *, /, //, % and ** (`text`: the operator as written).
Value arithmetic(Op op, const std::string& text, const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    const Int x = a.integer(), y = b.integer();
    Int r = 0;
    switch (op) {
      case Op::kAdd:
        if (__builtin_add_overflow(x, y, &r)) beyond_128_bits("+");
        return Value::integer(r);
      case Op::kSub:
        if (__builtin_sub_overflow(x, y, &r)) beyond_128_bits("-");
        return Value::integer(r);
      case Op::kMul:
        if (__builtin_mul_overflow(x, y, &r)) beyond_128_bits("*");
        return Value::integer(r);
      case Op::kPow:
        if (y >= 0) return int_pow(x, y);
        if (x == 0) throw Refused{"0 cannot be raised to a negative power"};
        return float_pow(a.to_double(), b.to_double());  // Python: a float
      default: break;
    }
    if (y == 0) throw Refused{"division by zero (" + text + " 0)"};
    if (op == Op::kDiv) {
      // True division: correctly rounded when the quotient is whole
      // (2**60 / 2) or both are doubles exactly; otherwise it may round
      // twice (Python rounds once).
      if (!(x == Value::kIntMin && y == -1) && x % y == 0) return Value::real(static_cast<double>(x / y));
      return Value::real(static_cast<double>(x) / static_cast<double>(y));
    }
    if (x == Value::kIntMin && y == -1) {
      if (op == Op::kMod) return Value(0);
      beyond_128_bits("//");
    }
    Int q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {  // floored, as Python's
      q -= 1;
      m += y;
    }
    return Value::integer(op == Op::kFloorDiv ? q : m);
  }
  // A float on either side: both as floats (an integer rounded to nearest).
  const double x = a.to_double(), y = b.to_double();
  switch (op) {
    case Op::kAdd: return Value::real(x + y);
    case Op::kSub: return Value::real(x - y);
    case Op::kMul: return Value::real(x * y);
    case Op::kPow: return float_pow(x, y);
    default: break;
  }
  if (y == 0) throw Refused{"division by zero (" + text + " 0)"};
  if (op == Op::kDiv) return Value::real(x / y);
  double div = 0, mod = 0;
  float_divmod(x, y, div, mod);
  return Value::real(op == Op::kFloorDiv ? div : mod);
}

Value comparison(Op op, const Value& a, const Value& b) {
  const std::optional<int> c = compare(a, b);
  if (!c) return boolean(op == Op::kNe);  // NaN: unordered, unequal
  switch (op) {
    case Op::kEq: return boolean(*c == 0);
    case Op::kNe: return boolean(*c != 0);
    case Op::kLt: return boolean(*c < 0);
    case Op::kLe: return boolean(*c <= 0);
    case Op::kGt: return boolean(*c > 0);
    default: return boolean(*c >= 0);  // >=
  }
}

Value eval_node(const Expr::Node& n, const Vars& vars) {
  switch (n.kind) {
    case Expr::Node::kNum: return n.num;
    case Expr::Node::kVar: {
      const Value* v = vars.get(n.slot);
      if (v == nullptr) throw std::logic_error("variable '" + n.name + "' is not set");
      return *v;
    }
    case Expr::Node::kUnary: {
      const Value a = eval_node(*n.args[0], vars);
      if (n.op == Op::kNot) return boolean(!a.truthy());
      if (!a.is_int()) return Value::real(-a.real());
      if (a.integer() == Value::kIntMin) beyond_128_bits("-");
      return Value::integer(-a.integer());
    }
    case Expr::Node::kCall: {
      const Value a = eval_node(*n.args[0], vars);
      if (n.op == Op::kIf) return eval_node(*n.args[a.truthy() ? 1 : 2], vars);
      if (n.op == Op::kAbs) {
        if (!a.is_int()) return Value::real(std::fabs(a.real()));
        if (a.integer() == Value::kIntMin) beyond_128_bits("abs");
        return Value::integer(a.integer() < 0 ? -a.integer() : a.integer());
      }
      const Value b = eval_node(*n.args[1], vars);
      // Python's min(a, b) is a unless b < a; max(a, b) is a unless b > a.
      const std::optional<int> c = compare(b, a);
      if (n.op == Op::kMin) return c && *c < 0 ? b : a;
      return c && *c > 0 ? b : a;
    }
    case Expr::Node::kBinary: {
      const Value a = eval_node(*n.args[0], vars);
      // Python's and/or give an operand: 0 or 5 is 5, 2 and 3 is 3.
      if (n.op == Op::kAnd) return a.truthy() ? eval_node(*n.args[1], vars) : a;
      if (n.op == Op::kOr) return a.truthy() ? a : eval_node(*n.args[1], vars);
      const Value b = eval_node(*n.args[1], vars);
      switch (n.op) {
        case Op::kEq: case Op::kNe: case Op::kLt: case Op::kLe: case Op::kGt: case Op::kGe:
          return comparison(n.op, a, b);
        default: return arithmetic(n.op, n.name, a, b);
      }
    }
  }
  throw std::logic_error("unknown expression node");
}

}  // namespace

struct Expr::IntCode {
  struct Instr {
    Expr::Node::Kind kind;  // kNum: push `k`; kVar: push variable `k`; else apply `op`
    Op op;
    std::int64_t k;
  };
  std::vector<Instr> code;
  std::uint8_t vars = 0;  // bit k: uses Vars slot k
};

namespace {

// Appends `n` to `out` in postorder; false when some node is not int64 work.
bool compile_int(const Expr::Node& n, Expr::IntCode& out) {
  for (const auto& a : n.args)
    if (!compile_int(*a, out)) return false;
  switch (n.kind) {
    case Expr::Node::kNum: {
      if (!n.num.is_int() || n.num.integer() < INT64_MIN || n.num.integer() > INT64_MAX) return false;
      out.code.push_back({n.kind, Op::kNone, static_cast<std::int64_t>(n.num.integer())});
      return true;
    }
    case Expr::Node::kVar:
      out.vars = static_cast<std::uint8_t>(out.vars | (1u << n.slot));
      out.code.push_back({n.kind, Op::kNone, n.slot});
      return true;
    default:
      if (n.op == Op::kNone || n.op == Op::kDiv || n.op == Op::kPow) return false;
      out.code.push_back({n.kind, n.op, 0});
      return true;
  }
}

// Runs `ic` over int64; nullopt when a variable is not an int64 integer or
// a step leaves int64 (or divides by zero): the tree decides those.
std::optional<std::int64_t> run_int(const Expr::IntCode& ic, const Vars& vars) {
  std::array<std::int64_t, Vars::kNames.size()> var{};
  for (std::size_t k = 0; k < var.size(); ++k) {
    if (!((ic.vars >> k) & 1u)) continue;
    const Value* v = vars.get(static_cast<int>(k));
    if (v == nullptr || !v->is_int() || v->integer() < INT64_MIN || v->integer() > INT64_MAX) return std::nullopt;
    var[k] = static_cast<std::int64_t>(v->integer());
  }
  std::array<std::int64_t, 2 * Expr::kMaxDepth + 2> stack;  // an "if" holds two values per level
  std::size_t top = 0;  // stack[0, top) is in use
  for (const auto& in : ic.code) {
    if (in.kind == Expr::Node::kNum) {
      stack[top++] = in.k;
      continue;
    }
    if (in.kind == Expr::Node::kVar) {
      stack[top++] = var[static_cast<std::size_t>(in.k)];
      continue;
    }
    std::int64_t r = 0;
    switch (in.op) {
      case Op::kNot: stack[top - 1] = stack[top - 1] == 0; continue;
      case Op::kNeg:
        if (stack[top - 1] == INT64_MIN) return std::nullopt;
        stack[top - 1] = -stack[top - 1];
        continue;
      case Op::kAbs:
        if (stack[top - 1] == INT64_MIN) return std::nullopt;
        stack[top - 1] = stack[top - 1] < 0 ? -stack[top - 1] : stack[top - 1];
        continue;
      case Op::kIf:  // args: cond, then, else
        top -= 2;
        stack[top - 1] = stack[top - 1] != 0 ? stack[top] : stack[top + 1];
        continue;
      default: break;
    }
    const std::int64_t x = stack[top - 2], y = stack[top - 1];
    --top;
    switch (in.op) {
      case Op::kAnd: r = x != 0 ? y : x; break;
      case Op::kOr: r = x != 0 ? x : y; break;
      case Op::kMin: r = y < x ? y : x; break;
      case Op::kMax: r = y > x ? y : x; break;
      case Op::kEq: r = x == y; break;
      case Op::kNe: r = x != y; break;
      case Op::kLt: r = x < y; break;
      case Op::kLe: r = x <= y; break;
      case Op::kGt: r = x > y; break;
      case Op::kGe: r = x >= y; break;
      case Op::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
        break;
      case Op::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
        break;
      case Op::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
        break;
      case Op::kFloorDiv:
      case Op::kMod: {
        if (y == 0 || (x == INT64_MIN && y == -1)) return std::nullopt;
        std::int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // floored, as Python's
          q -= 1;
          m += y;
        }
        r = in.op == Op::kFloorDiv ? q : m;
        break;
      }
      default: return std::nullopt;
    }
    stack[top - 1] = r;
  }
  return stack[0];
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
  auto code = std::make_shared<IntCode>();
  if (compile_int(*e.root_, *code)) e.int_code_ = std::move(code);
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
  if (int_code_)
    if (const std::optional<std::int64_t> v = run_int(*int_code_, vars)) return Value(*v);
  return eval_on_tree(vars);
}

Value Expr::eval_on_tree(const Vars& vars) const {
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
  for (std::size_t k = 0; k < Vars::kNames.size(); ++k)
    if (const Value* value = vars.get(static_cast<int>(k)))
      out += (out.empty() ? "" : ", ") + std::string(Vars::kNames[k]) + "=" + value->str();
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
