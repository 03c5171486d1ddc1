#include "scenario/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace collie::scenario {

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and transpositions of neighbours ("float23" is one edit from "float32").
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = 1000;
  for (const auto& k : known) {
    const std::size_t d = edit_distance(word, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  if (!best.empty() && best_d <= std::max<std::size_t>(2, word.size() / 3)) return " (did you mean '" + best + "'?)";
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  return " (expected one of: " + list + ")";
}


Location Reader::at(const YAML::Node& n) const {
  const YAML::Mark m = n.Mark();
  return Location{file_, m.line + 1, m.column + 1};
}
void Reader::fail(const YAML::Node& n, const std::string& msg) const { throw ScenarioError(at(n), msg); }
void Reader::fail(const Location& l, const std::string& msg) const { throw ScenarioError(l, msg); }

std::string Reader::kind_of(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (n.IsNull()) return "nothing";
  return "'" + n.Scalar() + "'";
}

void Reader::expect_map(const YAML::Node& n, const std::string& what) const {
  if (!n.IsMap()) fail(n, what + " must be a mapping of keys to values, not " + kind_of(n));
}

// Every key of `map` must be in `allowed`; keys appear once.
void Reader::check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& what) const {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar()) fail(it->first, "keys of " + what + " must be plain words");
    const std::string k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      fail(it->first, "unknown key '" + k + "' in " + what + did_you_mean(k, allowed));
    if (!seen.insert(k).second) fail(it->first, "key '" + k + "' appears twice in " + what);
  }
}

YAML::Node Reader::require(const YAML::Node& map, const std::string& key, const std::string& what) const {
  YAML::Node n = map[key];
  if (!n) fail(map, what + " needs the key '" + key + "'");
  return n;
}

long long Reader::as_int(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be an integer, not " + kind_of(n));
  const std::string& s = n.Scalar();
  try {
    std::size_t used = 0;
    long long v = std::stoll(s, &used, 0);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  fail(n, what + " must be an integer, not '" + s + "'");
}
std::uint64_t Reader::as_u64(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be a non-negative integer, not " + kind_of(n));
  const std::string& s = n.Scalar();
  try {
    std::size_t used = 0;
    if (!s.empty() && s[0] != '-') {
      unsigned long long v = std::stoull(s, &used, 0);
      if (used == s.size()) return v;
    }
  } catch (const std::exception&) {
  }
  fail(n, what + " must be a non-negative integer, not '" + s + "'");
}
double Reader::as_double(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be a number, not " + kind_of(n));
  const std::string& s = n.Scalar();
  if (s == ".inf" || s == "inf") return INFINITY;
  if (s == "-.inf" || s == "-inf") return -INFINITY;
  if (s == ".nan" || s == "nan") return NAN;
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  if (s == "true" || s == "True") return 1;
  if (s == "false" || s == "False") return 0;
  fail(n, what + " must be a number, not '" + s + "'");
}
Value Reader::as_value(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be a number, not " + kind_of(n));
  const std::string& s = n.Scalar();
  if (s == ".inf" || s == "inf" || s == "+.inf" || s == ".Inf" || s == ".INF") return Value::real(INFINITY);
  if (s == "-.inf" || s == "-inf" || s == "-.Inf" || s == "-.INF") return Value::real(-INFINITY);
  if (s == ".nan" || s == "nan" || s == ".NaN" || s == ".NAN") return Value::real(NAN);
  if (s == "true" || s == "True") return Value(1);
  if (s == "false" || s == "False") return Value(0);
  const bool negative = !s.empty() && s[0] == '-';
  const std::size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  std::size_t length = 0;
  std::string error;
  const std::optional<Value> v = scan_number(std::string_view(s).substr(sign), length, error, true);
  if (v && sign + length == s.size()) {
    if (!negative) return *v;
    return v->is_int() ? Value::integer(-v->integer()) : Value::real(-v->real());
  }
  fail(n, what + " must be a number, not '" + s + "'" + (error.empty() ? "" : ": " + error));
}
bool Reader::as_bool(const YAML::Node& n, const std::string& what) const {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
  }
  fail(n, what + " must be true or false, not " + kind_of(n));
}
std::string Reader::as_string(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, what + " must be a string, not " + kind_of(n));
  return n.Scalar();
}
std::vector<int> Reader::as_rank_list(const YAML::Node& n, const std::string& what) const {
  if (!n.IsSequence()) fail(n, what + " must be a list of ranks, not " + kind_of(n));
  std::vector<int> out;
  for (const auto& e : n) out.push_back(static_cast<int>(as_int(e, "each entry of " + what)));
  return out;
}
// An expression from a number or a string.
Expr Reader::as_expr(const YAML::Node& n, const std::string& what, const std::vector<std::string>& vars) const {
  if (!n.IsScalar()) fail(n, what + " must be a number or an expression, not " + kind_of(n));
  Location l = at(n);
  if (n.Tag() == "!" ) l.column += 1;  // quoted: point inside the quotes
  return Expr::parse(n.Scalar(), l, vars);
}


}  // namespace collie::scenario
