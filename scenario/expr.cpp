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
  double num = 0;
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
      // Python's float literals: a subnormal (5e-324) is a value, one too
      // large for a double (1e400) is inf.
      const char* start = s_.c_str() + pos_;
      char* end = nullptr;
      const double v = std::strtod(start, &end);
      if (end == start) fail("bad number");
      pos_ += static_cast<std::size_t>(end - start);
      return constant(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      if (name == "True" || name == "true") return constant(1);
      if (name == "False" || name == "false") return constant(0);
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
  static NodeP constant(double v) {
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

double eval_node(const Expr::Node& n, const std::map<std::string, double>& vars) {
  switch (n.kind) {
    case Expr::Node::kNum: return n.num;
    case Expr::Node::kVar: {
      auto it = vars.find(n.name);
      if (it == vars.end()) throw std::logic_error("variable '" + n.name + "' is not set");
      return it->second;
    }
    case Expr::Node::kUnary: {
      const double a = eval_node(*n.args[0], vars);
      return n.name == "-" ? -a : (a == 0 ? 1.0 : 0.0);
    }
    case Expr::Node::kCall: {
      const double a = eval_node(*n.args[0], vars);
      if (n.name == "if") return eval_node(*n.args[a != 0 ? 1 : 2], vars);
      if (n.name == "abs") return std::fabs(a);
      const double b = eval_node(*n.args[1], vars);
      return n.name == "min" ? std::min(a, b) : std::max(a, b);
    }
    case Expr::Node::kBinary: {
      const std::string& op = n.name;
      const double a = eval_node(*n.args[0], vars);
      if (op == "and") return a != 0 ? (eval_node(*n.args[1], vars) != 0 ? 1.0 : 0.0) : 0.0;
      if (op == "or") return a != 0 ? 1.0 : (eval_node(*n.args[1], vars) != 0 ? 1.0 : 0.0);
      const double b = eval_node(*n.args[1], vars);
      if (op == "+") return a + b;
      if (op == "-") return a - b;
      if (op == "*") return a * b;
      if ((op == "/" || op == "//" || op == "%") && b == 0)
        throw Refused{"division by zero (" + op + " 0)"};
      if (op == "/") return a / b;
      if (op == "//") return std::floor(a / b);
      if (op == "%") return a - b * std::floor(a / b);
      if (op == "**") {
        if (a == 0 && b < 0) throw Refused{"0 cannot be raised to a negative power"};
        return std::pow(a, b);
      }
      if (op == "==") return a == b ? 1.0 : 0.0;
      if (op == "!=") return a != b ? 1.0 : 0.0;
      if (op == "<") return a < b ? 1.0 : 0.0;
      if (op == "<=") return a <= b ? 1.0 : 0.0;
      if (op == ">") return a > b ? 1.0 : 0.0;
      if (op == ">=") return a >= b ? 1.0 : 0.0;
      break;
    }
  }
  return NAN;
}

bool uses_vars(const Expr::Node& n) {
  if (n.kind == Expr::Node::kVar) return true;
  for (const auto& a : n.args)
    if (uses_vars(*a)) return true;
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

Expr Expr::constant(double v) {
  Expr e;
  auto n = std::make_shared<Node>();
  n->kind = Node::kNum;
  n->num = v;
  e.root_ = n;
  std::string t = std::to_string(v);
  e.text_ = t;
  return e;
}

double Expr::eval(const std::map<std::string, double>& vars) const {
  if (!root_) return 0.0;
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

std::string Expr::describe_vars(const std::map<std::string, double>& vars) {
  std::string out;
  for (const auto& [name, value] : vars) {
    std::ostringstream v;
    if (value == std::trunc(value) && std::fabs(value) < 1e15) v << static_cast<long long>(value);
    else v << value;
    out += (out.empty() ? "" : ", ") + name + "=" + v.str();
  }
  return out;
}

bool Expr::is_constant() const { return !root_ || !uses_vars(*root_); }

std::string as_written(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e16) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return python_float(v);
}

}  // namespace collie::scenario
