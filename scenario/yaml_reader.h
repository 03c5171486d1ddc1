// Reading a scenario file's YAML: typed values with file:line:column on
// every error (ScenarioError), keys checked against what a mapping takes,
// and did-you-mean suggestions for names that are nearly right.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "scenario/expr.h"
#include "scenario/location.h"

namespace collie::scenario {

// " (did you mean 'float32'?)" when `word` is a few edits from one of
// `known`, else " (expected one of: a, b, c)".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& known);

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  Location at(const YAML::Node& n) const;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const;
  [[noreturn]] void fail(const Location& l, const std::string& msg) const;

  // "a mapping", "a list", "nothing" or the scalar in quotes.
  static std::string kind_of(const YAML::Node& n);

  void expect_map(const YAML::Node& n, const std::string& what) const;
  // Every key of `map` must be in `allowed`; keys appear once.
  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& what) const;
  YAML::Node require(const YAML::Node& map, const std::string& key, const std::string& what) const;

  long long as_int(const YAML::Node& n, const std::string& what) const;
  std::uint64_t as_u64(const YAML::Node& n, const std::string& what) const;
  double as_double(const YAML::Node& n, const std::string& what) const;
  // A number as written, exactly: an integer stays one (9007199254740993,
  // 0x7fffffffffffffff, -128), a float is the nearest double (2.5, 1e3,
  // .inf, -.inf, .nan); true and false are 1 and 0. An integer beyond 128
  // bits is refused at the scalar.
  Value as_value(const YAML::Node& n, const std::string& what) const;
  bool as_bool(const YAML::Node& n, const std::string& what) const;
  std::string as_string(const YAML::Node& n, const std::string& what) const;
  std::vector<int> as_rank_list(const YAML::Node& n, const std::string& what) const;
  // An expression from a number or a string, over `vars`.
  Expr as_expr(const YAML::Node& n, const std::string& what, const std::vector<std::string>& vars) const;

 private:
  std::string file_;
};

}  // namespace collie::scenario
