#include "scenario/loader.h"

#include "core/tensor.h"
#include "scenario/print_text.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace collie::scenario {

namespace {

const std::vector<std::string> kPeerVars = {"rank", "world"};
const std::vector<std::string> kShapeVars = {"world"};
const std::vector<std::string> kInitVars = {"rank", "world", "i", "j"};
const std::vector<std::string> kUpdateVars = {"rank", "world", "i", "j", "x"};
const std::vector<std::string> kSplitVars = {"rank", "world", "j"};

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

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  Location at(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    return Location{file_, m.line + 1, m.column + 1};
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& msg) const { throw ScenarioError(at(n), msg); }
  [[noreturn]] void fail(const Location& l, const std::string& msg) const { throw ScenarioError(l, msg); }

  static std::string kind_of(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "nothing";
    return "'" + n.Scalar() + "'";
  }

  void expect_map(const YAML::Node& n, const std::string& what) const {
    if (!n.IsMap()) fail(n, what + " must be a mapping of keys to values, not " + kind_of(n));
  }

  // Every key of `map` must be in `allowed`; keys appear once.
  void check_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& what) const {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) fail(it->first, "keys of " + what + " must be plain words");
      const std::string k = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        fail(it->first, "unknown key '" + k + "' in " + what + did_you_mean(k, allowed));
      if (!seen.insert(k).second) fail(it->first, "key '" + k + "' appears twice in " + what);
    }
  }

  YAML::Node require(const YAML::Node& map, const std::string& key, const std::string& what) const {
    YAML::Node n = map[key];
    if (!n) fail(map, what + " needs the key '" + key + "'");
    return n;
  }

  long long as_int(const YAML::Node& n, const std::string& what) const {
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
  std::uint64_t as_u64(const YAML::Node& n, const std::string& what) const {
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
  double as_double(const YAML::Node& n, const std::string& what) const {
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
  bool as_bool(const YAML::Node& n, const std::string& what) const {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      if (s == "true" || s == "True" || s == "yes") return true;
      if (s == "false" || s == "False" || s == "no") return false;
    }
    fail(n, what + " must be true or false, not " + kind_of(n));
  }
  std::string as_string(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(n, what + " must be a string, not " + kind_of(n));
    return n.Scalar();
  }
  std::vector<int> as_rank_list(const YAML::Node& n, const std::string& what) const {
    if (!n.IsSequence()) fail(n, what + " must be a list of ranks, not " + kind_of(n));
    std::vector<int> out;
    for (const auto& e : n) out.push_back(static_cast<int>(as_int(e, "each entry of " + what)));
    return out;
  }
  // An expression from a number or a string.
  Expr as_expr(const YAML::Node& n, const std::string& what, const std::vector<std::string>& vars) const {
    if (!n.IsScalar()) fail(n, what + " must be a number or an expression, not " + kind_of(n));
    Location l = at(n);
    if (n.Tag() == "!" ) l.column += 1;  // quoted: point inside the quotes
    return Expr::parse(n.Scalar(), l, vars);
  }

 private:
  std::string file_;
};

const std::vector<std::string> kTopKeys = {"version", "name", "description", "world", "backend", "seed", "check", "timing_only",
                                           "conformance", "feature", "network", "groups", "tensors", "program",
                                           "programs", "outcome", "faults", "timeout_us", "unspecified"};

// Larger files are refused before they are read (a scenario is a few KiB;
// /dev/zero is not one).
constexpr std::uintmax_t kMaxScenarioFileBytes = 16u << 20;

struct StepKeys {
  StepKind kind;
  const char* name;
  std::vector<std::string> keys;
};

const std::vector<StepKeys>& step_table() {
  static const std::vector<StepKeys> t = {
      {StepKind::kSend, "send", {"tensor", "dst", "tag", "group"}},
      {StepKind::kIsend, "isend", {"tensor", "dst", "tag", "group", "handle"}},
      {StepKind::kRecv, "recv", {"tensor", "src", "tag", "group"}},
      {StepKind::kIrecv, "irecv", {"tensor", "src", "tag", "group", "handle"}},
      {StepKind::kWait, "wait", {"handle", "handles"}},
      {StepKind::kBroadcast, "broadcast", {"tensor", "src", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kReduce, "reduce", {"tensor", "dst", "reduce_op", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kAllReduce, "all_reduce", {"tensor", "reduce_op", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kScatter, "scatter", {"tensor", "src", "list", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kGather, "gather", {"tensor", "dst", "list", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kAllGather, "all_gather", {"list", "tensor", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kAllGatherIntoTensor, "all_gather_into_tensor", {"output", "tensor", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kBarrier, "barrier", {"group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kReduceScatter, "reduce_scatter", {"output", "list", "reduce_op", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kReduceScatterTensor, "reduce_scatter_tensor", {"output", "tensor", "reduce_op", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kAllToAll, "all_to_all", {"output", "list", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kAllToAllSingle, "all_to_all_single", {"output", "tensor", "output_split_sizes", "input_split_sizes", "group", "handle", "algorithm", "timeout_us"}},
      {StepKind::kNewGroup, "new_group", {"name", "members"}},
      {StepKind::kPrint, "print", {"text"}},
      {StepKind::kExpect, "expect", {"tensor", "equals", "value", "tolerance", "handle", "source", "unspecified"}},
      {StepKind::kUpdate, "update", {"tensor", "value"}},
  };
  return t;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const auto& s : step_table()) out.push_back(s.name);
  return out;
}

}  // namespace
void evaluate_shape(TensorSpec& t, int world, const Location& where);
namespace {

const std::vector<std::string> kCommonStepKeys = {"op", "ranks", "if"};

std::string as_written(double v);
bool integral(double v);

bool is_async_capable(StepKind k) {
  return k == StepKind::kIsend || k == StepKind::kIrecv || k == StepKind::kBroadcast || k == StepKind::kReduce ||
         k == StepKind::kAllReduce || k == StepKind::kScatter || k == StepKind::kGather ||
         k == StepKind::kAllGather || k == StepKind::kAllGatherIntoTensor || k == StepKind::kBarrier ||
         k == StepKind::kReduceScatter || k == StepKind::kReduceScatterTensor || k == StepKind::kAllToAll ||
         k == StepKind::kAllToAllSingle;
}

bool takes_output(StepKind k) {
  return k == StepKind::kAllGatherIntoTensor || k == StepKind::kReduceScatter || k == StepKind::kReduceScatterTensor ||
         k == StepKind::kAllToAll || k == StepKind::kAllToAllSingle;
}

class Loader {
 public:
  explicit Loader(std::string file, LoadOverrides overrides = {})
      : r_(file), file_(std::move(file)), overrides_(overrides) {}

  Scenario load(const std::string& text) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ScenarioError(Location{file_, e.mark.line + 1, e.mark.column + 1}, "invalid YAML: " + e.msg);
    }
    if (!doc || doc.IsNull()) throw ScenarioError(Location{file_, 1, 1}, "the file is empty; a scenario starts with 'version: 1'");
    r_.expect_map(doc, "a scenario");
    r_.check_keys(doc, kTopKeys, "the scenario");
    Scenario s;
    s.file = file_;
    s.where = r_.at(doc);
    const YAML::Node v = r_.require(doc, "version", "a scenario");
    s.version = static_cast<int>(r_.as_int(v, "version"));
    if (s.version != kFormatVersion)
      r_.fail(v, "unsupported format version " + std::to_string(s.version) + "; this collie reads version 1");
    s.name = r_.as_string(r_.require(doc, "name", "a scenario"), "name");
    if (doc["description"]) s.description = r_.as_string(doc["description"], "description");
    const YAML::Node w = r_.require(doc, "world", "a scenario");
    const long long world = r_.as_int(w, "world");
    if (world < 1 || world > (1 << 20)) r_.fail(w, "world must be between 1 and 1048576, not " + std::to_string(world));
    s.world = static_cast<int>(world);
    if (overrides_.world) {
      if (*overrides_.world < 1 || *overrides_.world > (1 << 20))
        r_.fail(w, "--world must be between 1 and 1048576, not " + std::to_string(*overrides_.world));
      s.world = *overrides_.world;
      s.world_overridden = true;
    }
    if (doc["unspecified"]) s.unspecified = r_.as_string(doc["unspecified"], "unspecified");
    if (doc["backend"]) s.backend = r_.as_string(doc["backend"], "backend");
    if (doc["seed"]) s.seed = r_.as_u64(doc["seed"], "seed");
    if (doc["check"]) s.check = r_.as_bool(doc["check"], "check");
    if (doc["timing_only"]) s.timing_only = r_.as_bool(doc["timing_only"], "timing_only");
    if (doc["conformance"]) s.conformance = r_.as_bool(doc["conformance"], "conformance");
    if (doc["feature"]) s.feature = r_.as_string(doc["feature"], "feature");
    if (doc["network"]) s.network = network(doc["network"]);
    if (doc["faults"] && !doc["faults"].IsNull()) s.faults = faults(doc["faults"]);
    if (doc["timeout_us"]) {
      const double t = r_.as_double(doc["timeout_us"], "timeout_us");
      if (!(t > 0)) r_.fail(doc["timeout_us"], "timeout_us must be > 0");
      s.timeout_ns = static_cast<Nanos>(t * 1000);
    }
    if (doc["groups"]) groups(doc["groups"], s);
    if (doc["tensors"]) tensors(doc["tensors"], s);
    if (doc["program"] && doc["programs"]) r_.fail(doc["programs"], "a scenario has either 'program' (every rank) or 'programs' (per rank), not both");
    if (doc["program"]) {
      s.program = steps(doc["program"], "program");
    } else if (doc["programs"]) {
      const YAML::Node p = doc["programs"];
      r_.expect_map(p, "programs");
      for (auto it = p.begin(); it != p.end(); ++it) {
        const int rank = static_cast<int>(r_.as_int(it->first, "a key of programs (a rank)"));
        if (s.programs.count(rank)) r_.fail(it->first, "rank " + std::to_string(rank) + " has two programs");
        rank_where_[rank] = r_.at(it->first);
        s.programs[rank] = steps(it->second, "the program of rank " + std::to_string(rank));
      }
    } else {
      r_.fail(doc, "a scenario needs 'program' (steps every rank runs) or 'programs' (steps per rank)");
    }
    if (doc["outcome"]) s.outcome = outcome(doc["outcome"]);
    check_names(s);
    check_world_impl(s);
    return s;
  }

  void check_world_impl(const Scenario& s);

  // A network profile file: {version: 1, network: {...}, ...}; other
  // top-level keys (what was measured, where, when) are informational.
  sim::NetworkModel profile(const std::string& text) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ScenarioError(Location{file_, e.mark.line + 1, e.mark.column + 1}, e.msg);
    }
    r_.expect_map(doc, "a network profile");
    const YAML::Node v = r_.require(doc, "version", "a network profile");
    if (r_.as_int(v, "version") != 1) r_.fail(v, "unsupported profile version; this collie reads version 1");
    const YAML::Node n = r_.require(doc, "network", "a network profile");
    if (n["profile"]) r_.fail(n["profile"], "a profile cannot name another profile");
    return network(n);
  }

 private:
  sim::NetworkModel network(const YAML::Node& n) {
    r_.expect_map(n, "network");
    r_.check_keys(n, {"profile", "ranks_per_node", "intra", "inter", "reduce_GBps", "eager_threshold_bytes", "jitter",
                      "cpu_bound", "overhead_us", "oversubscribed_overhead_us", "oversubscribed_cpu_factor",
                      "cores_per_node", "cache_bytes",
                      "memory_bandwidth_GBps", "memory_reduce_GBps"},
                  "network");
    sim::NetworkModel m;
    if (n["profile"]) {
      // A measured profile (collie calibrate) is the base; keys given here
      // override it. The path is relative to the scenario file.
      std::string path = r_.as_string(n["profile"], "profile");
      if (!path.empty() && path[0] != '/') {
        const auto slash = file_.find_last_of('/');
        if (slash != std::string::npos) path = file_.substr(0, slash + 1) + path;
      }
      try {
        m = load_profile(path);
      } catch (const ScenarioError& e) {
        r_.fail(n["profile"], std::string("network profile: ") + e.what());
      }
    }
    if (n["ranks_per_node"]) m.ranks_per_node = static_cast<int>(r_.as_int(n["ranks_per_node"], "ranks_per_node"));
    if (m.ranks_per_node < 0) r_.fail(n["ranks_per_node"], "ranks_per_node must be >= 0 (0: one node)");
    auto link = [&](const YAML::Node& l, const char* what, sim::LinkModel& out) {
      r_.expect_map(l, what);
      r_.check_keys(l, {"alpha_us", "bandwidth_GBps"}, what);
      if (l["alpha_us"]) out.alpha_us = r_.as_double(l["alpha_us"], "alpha_us");
      if (l["bandwidth_GBps"]) out.bandwidth_GBps = r_.as_double(l["bandwidth_GBps"], "bandwidth_GBps");
      if (out.alpha_us < 0 || !(out.bandwidth_GBps > 0)) r_.fail(l, std::string(what) + ": alpha_us must be >= 0 and bandwidth_GBps > 0");
    };
    if (n["intra"]) link(n["intra"], "network.intra", m.intra);
    if (n["inter"]) link(n["inter"], "network.inter", m.inter);
    if (n["reduce_GBps"]) {
      m.reduce_GBps = r_.as_double(n["reduce_GBps"], "reduce_GBps");
      if (m.reduce_GBps < 0) r_.fail(n["reduce_GBps"], "reduce_GBps must be >= 0 (0: reductions are free)");
    }
    if (n["eager_threshold_bytes"])
      m.eager_threshold_bytes = r_.as_u64(n["eager_threshold_bytes"], "eager_threshold_bytes");
    if (n["jitter"]) {
      m.jitter_fraction = r_.as_double(n["jitter"], "jitter");
      if (m.jitter_fraction < 0) r_.fail(n["jitter"], "jitter must be >= 0");
    }
    if (n["cpu_bound"]) m.cpu_bound = r_.as_bool(n["cpu_bound"], "cpu_bound");
    for (auto [key, field] : {std::pair{"overhead_us", &m.overhead_us},
                              std::pair{"oversubscribed_overhead_us", &m.oversubscribed_overhead_us}}) {
      if (!n[key]) continue;
      *field = r_.as_double(n[key], key);
      if (*field < 0) r_.fail(n[key], std::string(key) + " must be >= 0");
    }
    if (n["oversubscribed_cpu_factor"]) {
      m.oversubscribed_cpu_factor = r_.as_double(n["oversubscribed_cpu_factor"], "oversubscribed_cpu_factor");
      if (!(m.oversubscribed_cpu_factor >= 1))
        r_.fail(n["oversubscribed_cpu_factor"], "oversubscribed_cpu_factor must be >= 1 (1: time slicing loses nothing)");
    }
    if (n["cores_per_node"]) {
      m.cores_per_node = static_cast<int>(r_.as_int(n["cores_per_node"], "cores_per_node"));
      if (m.cores_per_node < 0) r_.fail(n["cores_per_node"], "cores_per_node must be >= 0 (0: one core per rank)");
    }
    if (n["cache_bytes"]) m.cache_bytes = r_.as_u64(n["cache_bytes"], "cache_bytes");
    for (auto [key, field] : {std::pair{"memory_bandwidth_GBps", &m.memory_bandwidth_GBps},
                              std::pair{"memory_reduce_GBps", &m.memory_reduce_GBps}}) {
      if (!n[key]) continue;
      *field = r_.as_double(n[key], key);
      if (*field < 0) r_.fail(n[key], std::string(key) + " must be >= 0 (0: the in-cache rate applies)");
    }
    return m;
  }

  // Each fault is a mapping {fault: KIND, key: value, ...} with the keys of
  // the command line's --fault KIND:key=value,... (lists of ranks as lists).
  sim::FaultPlan faults(const YAML::Node& n) {
    if (!n.IsSequence()) r_.fail(n, "faults must be a list of {fault: KIND, ...} mappings, not " + Reader::kind_of(n));
    sim::FaultPlan plan;
    for (const auto& f : n) {
      r_.expect_map(f, "a fault");
      const YAML::Node kind = r_.require(f, "fault", "a fault");
      std::string text = r_.as_string(kind, "fault") + ":";
      bool first = true;
      for (auto it = f.begin(); it != f.end(); ++it) {
        const std::string key = r_.as_string(it->first, "a fault key");
        if (key == "fault") continue;
        std::string value;
        // A copy: iterating it->second directly would range over a member of
        // a temporary that dies before the loop runs (found by the fuzz test).
        const YAML::Node v = it->second;
        if (v.IsSequence()) {
          for (const auto& e : v) value += (value.empty() ? "" : "+") + r_.as_string(e, key);
        } else {
          value = r_.as_string(v, key);
        }
        text += (first ? "" : ",") + key + "=" + value;
        first = false;
      }
      if (auto err = sim::parse_fault(text, plan)) r_.fail(f, *err);
    }
    return plan;
  }

  void groups(const YAML::Node& n, Scenario& s) {
    r_.expect_map(n, "groups");
    for (auto it = n.begin(); it != n.end(); ++it) {
      GroupSpec g;
      g.name = r_.as_string(it->first, "a group name");
      g.where = r_.at(it->first);
      if (g.name == "world") r_.fail(it->first, "'world' is the name of the whole world; choose another group name");
      if (s.find_group(g.name)) r_.fail(it->first, "group '" + g.name + "' is defined twice");
      g.ranks = r_.as_rank_list(it->second, "group '" + g.name + "'");
      group_locs_[g.name] = r_.at(it->second);
      s.groups.push_back(std::move(g));
    }
  }

  void tensors(const YAML::Node& n, Scenario& s) {
    r_.expect_map(n, "tensors");
    for (auto it = n.begin(); it != n.end(); ++it) {
      TensorSpec t;
      t.name = r_.as_string(it->first, "a tensor name");
      t.where = r_.at(it->first);
      if (s.find_tensor(t.name)) r_.fail(it->first, "tensor '" + t.name + "' is defined twice");
      const YAML::Node d = it->second;
      const std::string what = "tensor '" + t.name + "'";
      r_.expect_map(d, what);
      r_.check_keys(d, {"dtype", "shape", "init", "values", "list"}, what);
      const YAML::Node dt = r_.require(d, "dtype", what);
      auto parsed = parse_dtype(r_.as_string(dt, "dtype"));
      if (!parsed) {
        std::vector<std::string> names;
        for (int i = 0; i < kNumDTypes; ++i) names.emplace_back(dtype_name(static_cast<DType>(i)));
        r_.fail(dt, "unknown dtype '" + dt.Scalar() + "'" + did_you_mean(dt.Scalar(), names));
      }
      t.dtype = *parsed;
      if (d["shape"]) {
        const YAML::Node sh = d["shape"];
        std::vector<YAML::Node> dims;
        if (sh.IsScalar()) {
          dims.push_back(sh);
        } else if (sh.IsSequence()) {
          for (const auto& e : sh) dims.push_back(e);
        } else {
          r_.fail(sh, "shape must be a list of dimensions, not " + Reader::kind_of(sh));
        }
        // A dimension is a number or an expression of world ("world * 4").
        for (const auto& e : dims) t.shape_exprs.push_back(r_.as_expr(e, "each dimension of shape", kShapeVars));
        bool constant = true;
        for (const auto& e : t.shape_exprs) constant = constant && e.is_constant();
        evaluate_shape(t, s.world, r_.at(sh));
        if (constant) t.shape_exprs.clear();
      } else {
        t.shape = {1};
      }
      if (d["list"]) t.list = r_.as_expr(d["list"], "list", kPeerVars);
      if (d["init"] && d["values"]) r_.fail(d["values"], what + " has both 'init' and 'values'; give one");
      if (d["values"]) {
        const YAML::Node vs = d["values"];
        if (!vs.IsSequence()) r_.fail(vs, "values must be a list of numbers, not " + Reader::kind_of(vs));
        for (const auto& e : vs) {
          t.values.push_back(r_.as_double(e, "each of values"));
          if (auto why = value_unfit(t.dtype, t.values.back())) r_.fail(e, "values of " + what + ": " + *why);
        }
        if (t.values.size() != t.count())
          r_.fail(vs, "mismatched shapes: " + what + " has " + std::to_string(t.count()) + " elements but " +
                          std::to_string(t.values.size()) + " values");
      } else if (d["init"]) {
        t.init = r_.as_expr(d["init"], "init", kInitVars);
      } else {
        t.init = Expr::constant(0);
      }
      s.tensors.push_back(std::move(t));
    }
  }

  std::vector<Step> steps(const YAML::Node& n, const std::string& what) {
    if (!n.IsSequence()) r_.fail(n, what + " must be a list of steps, not " + Reader::kind_of(n));
    std::vector<Step> out;
    for (const auto& e : n) out.push_back(step(e));
    return out;
  }

  Step step(const YAML::Node& n) {
    r_.expect_map(n, "a step");
    const YAML::Node opn = r_.require(n, "op", "a step");
    const std::string op = r_.as_string(opn, "op");
    const StepKeys* def = nullptr;
    for (const auto& d : step_table())
      if (op == d.name) def = &d;
    if (!def) r_.fail(opn, "unknown op '" + op + "'" + did_you_mean(op, op_names()));
    std::vector<std::string> allowed = kCommonStepKeys;
    allowed.insert(allowed.end(), def->keys.begin(), def->keys.end());
    r_.check_keys(n, allowed, "a '" + op + "' step");
    Step s;
    s.kind = def->kind;
    s.where = r_.at(n);
    const std::string what = "'" + op + "'";
    if (n["ranks"]) s.ranks = r_.as_rank_list(n["ranks"], "ranks");
    if (n["if"]) s.when = r_.as_expr(n["if"], "if", kPeerVars);
    auto need = [&](const char* key) { return r_.require(n, key, "a " + what + " step"); };
    auto str = [&](const char* key) { return r_.as_string(n[key], key); };
    const bool takes_tensor = std::find(def->keys.begin(), def->keys.end(), "tensor") != def->keys.end();
    if (takes_tensor && s.kind != StepKind::kExpect) s.tensor = r_.as_string(need("tensor"), "tensor");
    if (s.kind == StepKind::kExpect && n["tensor"]) s.tensor = str("tensor");
    if (n["list"]) s.list = str("list");
    if (n["output"]) s.output = str("output");
    if (takes_output(s.kind) && !n["output"]) need("output");
    if (n["output_split_sizes"]) s.output_splits = split_sizes(n["output_split_sizes"], "output_split_sizes");
    if (n["input_split_sizes"]) s.input_splits = split_sizes(n["input_split_sizes"], "input_split_sizes");
    if (n["group"]) s.group = str("group");
    if (n["handle"]) s.handle = str("handle");
    s.tag = Expr::constant(0);
    if (n["tag"]) s.tag = r_.as_expr(n["tag"], "tag", kPeerVars);
    const char* peer_key = nullptr;
    switch (s.kind) {
      case StepKind::kSend:
      case StepKind::kIsend:
      case StepKind::kReduce:
      case StepKind::kGather: peer_key = "dst"; break;
      case StepKind::kRecv:
      case StepKind::kIrecv:
      case StepKind::kBroadcast:
      case StepKind::kScatter: peer_key = "src"; break;
      default: break;
    }
    if (peer_key) {
      const bool is_recv = s.kind == StepKind::kRecv || s.kind == StepKind::kIrecv;
      if (is_recv && !n[peer_key]) {
        s.any_source = true;
      } else {
        const YAML::Node p = need(peer_key);
        if (is_recv && p.IsScalar() && (p.Scalar() == "any" || p.Scalar() == "ANY")) s.any_source = true;
        else s.peer = r_.as_expr(p, peer_key, kPeerVars);
      }
    }
    if ((s.kind == StepKind::kScatter || s.kind == StepKind::kGather || s.kind == StepKind::kAllGather ||
         s.kind == StepKind::kReduceScatter || s.kind == StepKind::kAllToAll) &&
        !n["list"])
      need("list");
    if (s.kind == StepKind::kIsend || s.kind == StepKind::kIrecv) need("handle");
    if (n["reduce_op"]) {
      auto o = parse_reduce_op(str("reduce_op"));
      std::vector<std::string> names;
      for (int i = 0; i < kNumReduceOps; ++i) names.emplace_back(reduce_op_name(static_cast<ReduceOp>(i)));
      if (!o) r_.fail(n["reduce_op"], "unknown reduce_op '" + n["reduce_op"].Scalar() + "'" + did_you_mean(n["reduce_op"].Scalar(), names));
      s.op = *o;
    }
    if (n["timeout_us"]) {
      const double t = r_.as_double(n["timeout_us"], "timeout_us");
      if (!(t > 0)) r_.fail(n["timeout_us"], "timeout_us must be > 0");
      s.timeout_ns = static_cast<Nanos>(t * 1000);
    }
    if (n["algorithm"]) {
      auto a = parse_algorithm(str("algorithm"));
      std::vector<std::string> names;
      for (int i = 0; i <= static_cast<int>(Algorithm::kDissemination); ++i)
        names.emplace_back(algorithm_name(static_cast<Algorithm>(i)));
      if (!a) r_.fail(n["algorithm"], "unknown algorithm '" + n["algorithm"].Scalar() + "'" + did_you_mean(n["algorithm"].Scalar(), names));
      s.algorithm = *a;
    }
    switch (s.kind) {
      case StepKind::kWait:
        if (n["handle"] && n["handles"]) r_.fail(n, "a 'wait' step takes 'handle' or 'handles', not both");
        if (n["handles"]) {
          const YAML::Node hs = n["handles"];
          if (!hs.IsSequence()) r_.fail(hs, "handles must be a list of handle names");
          for (const auto& h : hs) s.handles.push_back(r_.as_string(h, "a handle name"));
        } else {
          s.handles.push_back(r_.as_string(need("handle"), "handle"));
        }
        s.handle.clear();
        break;
      case StepKind::kNewGroup:
        s.name = r_.as_string(need("name"), "name");
        s.members = r_.as_rank_list(need("members"), "members");
        break;
      case StepKind::kPrint: {
        const YAML::Node text = need("text");
        s.text = r_.as_string(text, "text");
        s.text_where = r_.at(text);
        if (text.Tag() == "!") s.text_where.column += 1;  // quoted: point inside the quotes
        break;
      }
      case StepKind::kUpdate:
        s.value = r_.as_expr(need("value"), "value", kUpdateVars);
        s.has_value = true;
        break;
      case StepKind::kExpect:
        if (n["equals"] && n["value"]) r_.fail(n["value"], "an 'expect' step takes 'equals' or 'value', not both");
        if (n["equals"]) {
          const YAML::Node e = n["equals"];
          if (e.IsSequence()) {
            for (const auto& x : e) {
              s.equals.push_back(r_.as_double(x, "each of equals"));
              equals_where_.push_back(r_.at(x));
            }
          } else {
            s.value = r_.as_expr(e, "equals", kInitVars);
            s.has_value = true;
          }
        } else if (n["value"]) {
          s.value = r_.as_expr(n["value"], "value", kInitVars);
          s.has_value = true;
        }
        if (n["tolerance"]) s.tolerance = r_.as_double(n["tolerance"], "tolerance");
        if (n["unspecified"]) s.unspecified = r_.as_string(n["unspecified"], "unspecified");
        if (n["source"]) s.source = r_.as_expr(n["source"], "source", kPeerVars);
        if (s.tensor.empty() && !s.source) r_.fail(n, "an 'expect' step needs 'tensor' (with 'equals' or 'value') or 'handle' with 'source'");
        if (!s.tensor.empty() && s.equals.empty() && !s.has_value)
          r_.fail(n, "an 'expect' step on tensor '" + s.tensor + "' needs 'equals' or 'value'");
        if (s.source && s.handle.empty()) r_.fail(n["source"], "'source' checks the receive of a 'handle'; name it");
        break;
      default:
        break;
    }
    if (!s.handle.empty() && !is_async_capable(s.kind) && s.kind != StepKind::kExpect)
      r_.fail(n["handle"], "a '" + op + "' step cannot take a handle");
    return s;
  }

  Outcome outcome(const YAML::Node& n) {
    Outcome o;
    o.where = r_.at(n);
    if (n.IsScalar()) {
      if (n.Scalar() == "ok") return o;
      r_.fail(n, "outcome must be 'ok', {error: KIND, ...} or {deadlock: [RANKS]}, not '" + n.Scalar() + "'");
    }
    r_.expect_map(n, "outcome");
    r_.check_keys(n, {"error", "contains", "rank", "deadlock"}, "outcome");
    if (n["error"] && n["deadlock"]) r_.fail(n, "an outcome is an error or a deadlock, not both");
    if (n["error"]) {
      o.kind = Outcome::kError;
      const std::string k = r_.as_string(n["error"], "error");
      std::vector<std::string> names;
      for (int i = 0; i <= static_cast<int>(ErrorKind::kUsage); ++i) {
        names.emplace_back(error_kind_name(static_cast<ErrorKind>(i)));
        if (names.back() == k) o.error_kind = static_cast<ErrorKind>(i);
      }
      if (!o.error_kind && k != "any") r_.fail(n["error"], "unknown error kind '" + k + "'" + did_you_mean(k, names));
      if (n["contains"]) o.contains = r_.as_string(n["contains"], "contains");
      if (n["rank"]) o.rank = static_cast<int>(r_.as_int(n["rank"], "rank"));
    } else if (n["deadlock"]) {
      o.kind = Outcome::kDeadlock;
      o.deadlocked_ranks = r_.as_rank_list(n["deadlock"], "deadlock");
      if (n["contains"]) o.contains = r_.as_string(n["contains"], "contains");
    } else {
      r_.fail(n, "outcome needs 'error' or 'deadlock' (or write: outcome: ok)");
    }
    return o;
  }

  // Names: every tensor, list, group and handle a step refers to exists and
  // is of the right sort; new groups and handles are not defined twice.
  // A print step's text: every field names something and every tensor
  // index is in range (lists, whose length may depend on the world, are
  // checked with it).
  void check_print(const Scenario& s, const Step& st, const std::set<std::string>& handles) {
    std::optional<PrintTextError> error;
    const auto parts = parse_print_text(st.text, &error);
    auto at = [&](std::size_t offset) {
      Location l = st.text_where.line > 0 ? st.text_where : st.where;
      l.column += static_cast<int>(offset);
      return l;
    };
    if (error) r_.fail(at(error->offset), "print: " + error->message);
    for (const PrintPart& p : parts) {
      if (!p.is_field) continue;
      const std::string field = "{" + p.text + (p.source ? ".source" : "") + (p.index ? "[" + std::to_string(*p.index) + "]" : "") + "}";
      if (p.source) {
        if (!handles.count(p.text)) r_.fail(at(p.offset), "print: " + field + " names no handle of an earlier step");
        continue;
      }
      if (p.text == "rank" || p.text == "world") {
        if (p.index) r_.fail(at(p.offset), "print: " + field + ": " + p.text + " is a number, it has no elements");
        continue;
      }
      const TensorSpec* t = s.find_tensor(p.text);
      if (!t) {
        std::vector<std::string> names = {"rank", "world"};
        for (const auto& x : s.tensors) names.push_back(x.name);
        r_.fail(at(p.offset), "print: " + field + " names nothing (fields: rank, world, a tensor or list, "
                              "HANDLE.source)" + did_you_mean(p.text, names));
      }
      if (!t->list && p.index && *p.index >= t->count())
        r_.fail(at(p.offset), "print: " + field + ": tensor '" + t->name + "' has " + std::to_string(t->count()) + " elements");
      if (p.repr && !p.index) r_.fail(at(p.offset), "print: " + field + ": !r takes an element, " + p.text + "[k]");
    }
  }

  void check_names(const Scenario& s) {
    // The literal values an expect step compares with must fit its tensor.
    std::size_t at_equals = 0;
    auto check_equals = [&](const Step& st) {
      const TensorSpec* t = st.kind == StepKind::kExpect && !st.tensor.empty() ? s.find_tensor(st.tensor) : nullptr;
      for (double x : st.equals) {
        const Location& where = at_equals < equals_where_.size() ? equals_where_[at_equals] : st.where;
        ++at_equals;
        if (!t) continue;
        if (auto why = value_unfit(t->dtype, x)) r_.fail(where, "equals of tensor '" + t->name + "': " + *why);
      }
    };
    for (const Step& st : s.program) check_equals(st);
    for (const auto& [rank, prog] : s.programs)
      for (const Step& st : prog) check_equals(st);
    auto check_prog = [&](const std::vector<Step>& prog) {
      std::set<std::string> groups;
      for (const auto& g : s.groups) groups.insert(g.name);
      std::set<std::string> handles;
      for (const Step& st : prog) {
        auto tensor = [&](const std::string& name, bool want_list, const char* role) {
          const TensorSpec* t = s.find_tensor(name);
          if (!t) {
            std::vector<std::string> names;
            for (const auto& x : s.tensors) names.push_back(x.name);
            r_.fail(st.where, "unknown tensor '" + name + "'" + (names.empty() ? std::string(" (no tensors are defined)") : did_you_mean(name, names)));
          }
          if (want_list && !t->list)
            r_.fail(st.where, std::string(role) + " '" + name + "' must be a list tensor (give it 'list: N')");
          if (!want_list && t->list)
            r_.fail(st.where, std::string(role) + " '" + name + "' is a list; this step needs a single tensor");
          return t;
        };
        auto any_tensor = [&](const std::string& name) {
          const TensorSpec* t = s.find_tensor(name);
          if (!t) {
            std::vector<std::string> names;
            for (const auto& x : s.tensors) names.push_back(x.name);
            r_.fail(st.where, "unknown tensor '" + name + "'" + (names.empty() ? std::string(" (no tensors are defined)") : did_you_mean(name, names)));
          }
          return t;
        };
        if (!st.group.empty() && st.group != "world" && !groups.count(st.group)) {
          std::vector<std::string> names(groups.begin(), groups.end());
          r_.fail(st.where, "unknown group '" + st.group + "'" + (names.empty() ? std::string(" (no groups are defined)") : did_you_mean(st.group, names)));
        }
        switch (st.kind) {
          case StepKind::kAllGather: {
            const TensorSpec* in = tensor(st.tensor, false, "tensor");
            const TensorSpec* out = tensor(st.list, true, "list");
            shapes_match(st, *in, *out);
            break;
          }
          case StepKind::kReduceScatter: {
            const TensorSpec* out = tensor(st.output, false, "output");
            const TensorSpec* l = tensor(st.list, true, "list");
            shapes_match(st, *out, *l);
            break;
          }
          case StepKind::kAllToAll: {
            const TensorSpec* out = tensor(st.output, true, "output");
            const TensorSpec* in = tensor(st.list, true, "list");
            if (in->dtype != out->dtype || in->count() != out->count())
              r_.fail(st.where, "mismatched shapes: each entry of output '" + out->name + "' is " +
                                    std::string(dtype_name(out->dtype)) + " x " + std::to_string(out->count()) +
                                    " but each entry of list '" + in->name + "' is " + std::string(dtype_name(in->dtype)) +
                                    " x " + std::to_string(in->count()));
            break;
          }
          case StepKind::kAllGatherIntoTensor:
          case StepKind::kReduceScatterTensor:
          case StepKind::kAllToAllSingle: {
            const TensorSpec* in = tensor(st.tensor, false, "tensor");
            const TensorSpec* out = tensor(st.output, false, "output");
            if (in->dtype != out->dtype)
              r_.fail(st.where, "output '" + out->name + "' is " + std::string(dtype_name(out->dtype)) + " but tensor '" +
                                    in->name + "' is " + std::string(dtype_name(in->dtype)));
            break;
          }
          case StepKind::kScatter:
          case StepKind::kGather: {
            const TensorSpec* in = tensor(st.tensor, false, "tensor");
            const TensorSpec* l = tensor(st.list, true, "list");
            shapes_match(st, *in, *l);
            break;
          }
          case StepKind::kExpect:
            if (!st.tensor.empty()) {
              const TensorSpec* t = any_tensor(st.tensor);
              if (!st.equals.empty() && st.equals.size() != t->count())
                r_.fail(st.where, "mismatched shapes: tensor '" + st.tensor + "' has " + std::to_string(t->count()) +
                                      " elements per tensor but 'equals' lists " + std::to_string(st.equals.size()));
            }
            if (!st.handle.empty() && !handles.count(st.handle))
              r_.fail(st.where, "unknown handle '" + st.handle + "'");
            break;
          case StepKind::kUpdate:
            any_tensor(st.tensor);
            break;
          case StepKind::kWait:
            for (const auto& h : st.handles)
              if (!handles.count(h)) {
                std::vector<std::string> names(handles.begin(), handles.end());
                r_.fail(st.where, "unknown handle '" + h + "'" + (names.empty() ? std::string(" (no async op before this step names one)") : did_you_mean(h, names)));
              }
            break;
          case StepKind::kNewGroup:
            if (st.name == "world" || groups.count(st.name)) r_.fail(st.where, "group '" + st.name + "' is defined twice");
            groups.insert(st.name);
            break;
          case StepKind::kPrint:
            check_print(s, st, handles);
            break;
          case StepKind::kBarrier:
            break;
          default:
            if (!st.tensor.empty()) tensor(st.tensor, false, "tensor");
            break;
        }
        if (!st.handle.empty() && st.kind != StepKind::kExpect) {
          if (!handles.insert(st.handle).second)
            r_.fail(st.where, "handle '" + st.handle + "' is defined twice in this program");
        }
      }
    };
    check_prog(s.program);
    for (const auto& [rank, prog] : s.programs) check_prog(prog);
  }

  // A list of expressions of rank and world, or one expression of rank,
  // world and j.
  SplitSizes split_sizes(const YAML::Node& n, const std::string& key) {
    SplitSizes out;
    out.where = r_.at(n);
    if (n.IsSequence()) {
      for (const auto& e : n) out.each.push_back(r_.as_expr(e, "each entry of " + key, kPeerVars));
      if (out.each.empty()) r_.fail(n, key + " must list one size per rank of the group (or be left out)");
    } else {
      out.of_j = r_.as_expr(n, key, kSplitVars);
    }
    return out;
  }

  // all_to_all_single's rule for one side on one rank, as torch checks it:
  // one size per group rank, summing to dim 0; without sizes, dim 0 divides
  // evenly.
  void check_splits(const Step& st, const SplitSizes& splits, const char* key, const TensorSpec& t, int rank, int world,
                    std::size_t n, const std::string& gname) {
    const std::string on = " on rank " + std::to_string(rank);
    const std::int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (!splits.given()) {
      if (n && rows % static_cast<std::int64_t>(n) != 0)
        r_.fail(st.where, "tensor '" + t.name + "' has " + std::to_string(rows) + " rows in dim 0, which " + gname +
                              "'s " + std::to_string(n) + " ranks do not divide; give " + key);
      return;
    }
    const std::vector<double> v = splits.eval(rank, world, n);
    if (v.size() != n)
      r_.fail(splits.where, std::string(key) + " lists " + std::to_string(v.size()) + " sizes but " + gname + " has " +
                                std::to_string(n) + " ranks");
    double sum = 0;
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (!integral(v[j]) || v[j] < 0)
        r_.fail(splits.where, std::string(key) + "[" + std::to_string(j) + "] is " + as_written(v[j]) + on +
                                  "; sizes are whole numbers of rows, at least 0");
      sum += v[j];
    }
    if (sum != static_cast<double>(rows))
      r_.fail(splits.where, std::string(key) + " sum to " + as_written(sum) + on + " but tensor '" + t.name + "' has " +
                                std::to_string(rows) + " rows in dim 0");
  }

  void shapes_match(const Step& st, const TensorSpec& t, const TensorSpec& l) {
    if (t.dtype != l.dtype || t.count() != l.count())
      r_.fail(st.where, "mismatched shapes: each entry of list '" + l.name + "' is " + std::string(dtype_name(l.dtype)) +
                            " x " + std::to_string(l.count()) + " but tensor '" + t.name + "' is " +
                            std::string(dtype_name(t.dtype)) + " x " + std::to_string(t.count()));
  }

 public:
  Reader r_;
  std::string file_;
  std::map<std::string, Location> group_locs_;
  std::map<int, Location> rank_where_;
  std::vector<Location> equals_where_;  // of every expect step's `equals` values, in file order
  LoadOverrides overrides_;
};

// A number in a message as a person writes it: 1000000000000, not
// 1000000000000.000000; 2.5; 1e+20.
std::string as_written(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e16) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return python_float(v);
}

std::map<std::string, double> vars_for(int rank, int world) {
  return {{"rank", static_cast<double>(rank)}, {"world", static_cast<double>(world)}};
}

bool integral(double v) { return std::isfinite(v) && v == std::floor(v); }

void Loader::check_world_impl(const Scenario& s) {
  const int W = s.world;
  std::map<std::string, std::vector<int>> groups;
  for (const auto& g : s.groups) {
    if (g.ranks.empty()) r_.fail(g.where, "group '" + g.name + "' has no ranks");
    std::set<int> seen;
    for (int r : g.ranks) {
      if (r < 0 || r >= W)
        r_.fail(group_locs_.count(g.name) ? group_locs_[g.name] : g.where,
                "rank " + std::to_string(r) + " in group '" + g.name + "' is out of range for world " + std::to_string(W));
      if (!seen.insert(r).second) r_.fail(g.where, "rank " + std::to_string(r) + " is listed twice in group '" + g.name + "'");
    }
    groups[g.name] = std::vector<int>(seen.begin(), seen.end());
  }
  for (const auto& [rank, where] : rank_where_)
    if (rank < 0 || rank >= W) r_.fail(where, "program for rank " + std::to_string(rank) + " is out of range for world " + std::to_string(W));
  for (const auto& t : s.tensors) {
    if (t.list) {
      const double n = t.list->eval(vars_for(0, W));
      if (!integral(n) || n < 0 || n > 1e6) r_.fail(t.where, "list of tensor '" + t.name + "' must be a count between 0 and 1000000, not " + as_written(n));
    }
  }
  auto fault_rank = [&](int r, const std::string& what) {
    if (r >= W) r_.fail(s.where, "fault: " + what + " " + std::to_string(r) + " is out of range for world " + std::to_string(W));
  };
  for (const auto& f : s.faults.messages) {
    fault_rank(f.src, "src");
    fault_rank(f.dst, "dst");
  }
  for (const auto& c : s.faults.crashes) fault_rank(c.rank, "crash rank");
  for (const auto& c : s.faults.slow) fault_rank(c.rank, "slow rank");
  for (const auto& c : s.faults.skews) fault_rank(c.rank, "skew rank");
  for (const auto& p : s.faults.partitions)
    for (int r : p.a) fault_rank(r, "partition rank");
  if (s.outcome.rank && (*s.outcome.rank < 0 || *s.outcome.rank >= W))
    r_.fail(s.outcome.where, "outcome rank " + std::to_string(*s.outcome.rank) + " is out of range for world " + std::to_string(W));
  for (int r : s.outcome.deadlocked_ranks)
    if (r < 0 || r >= W) r_.fail(s.outcome.where, "deadlocked rank " + std::to_string(r) + " is out of range for world " + std::to_string(W));

  auto check_prog = [&](const std::vector<Step>& prog, std::optional<int> only_rank) {
    auto grp = groups;
    for (const Step& st : prog) {
      if (st.ranks)
        for (int r : *st.ranks)
          if (r < 0 || r >= W) r_.fail(st.where, "rank " + std::to_string(r) + " in 'ranks' is out of range for world " + std::to_string(W));
      if (st.kind == StepKind::kNewGroup) {
        std::set<int> seen;
        for (int r : st.members) {
          if (r < 0 || r >= W) r_.fail(st.where, "rank " + std::to_string(r) + " in members is out of range for world " + std::to_string(W));
          if (!seen.insert(r).second) r_.fail(st.where, "rank " + std::to_string(r) + " is listed twice in members");
        }
        if (seen.empty()) r_.fail(st.where, "new_group needs at least one member");
        grp[st.name] = std::vector<int>(seen.begin(), seen.end());
        continue;
      }
      std::vector<int> members;
      if (st.group.empty() || st.group == "world") {
        for (int r = 0; r < W; ++r) members.push_back(r);
      } else {
        members = grp[st.group];
      }
      const std::string gname = st.group.empty() ? "world" : "group '" + st.group + "'";
      const bool collective = st.kind == StepKind::kBroadcast || st.kind == StepKind::kReduce ||
                              st.kind == StepKind::kAllReduce || st.kind == StepKind::kScatter ||
                              st.kind == StepKind::kGather || st.kind == StepKind::kAllGather ||
                              st.kind == StepKind::kAllGatherIntoTensor || st.kind == StepKind::kReduceScatter ||
                              st.kind == StepKind::kReduceScatterTensor || st.kind == StepKind::kAllToAll ||
                              st.kind == StepKind::kAllToAllSingle;
      if (st.kind == StepKind::kReduce || st.kind == StepKind::kAllReduce || st.kind == StepKind::kReduceScatter ||
          st.kind == StepKind::kReduceScatterTensor) {
        const bool into_output = st.kind == StepKind::kReduceScatter || st.kind == StepKind::kReduceScatterTensor;
        const TensorSpec* t = s.find_tensor(into_output ? st.output : st.tensor);
        if (auto why = reduce_op_unsupported(st.op, t->dtype)) r_.fail(st.where, *why);
      }
      if ((collective || st.kind == StepKind::kBarrier) && st.algorithm != Algorithm::kAuto) {
        CollectiveKind k = st.kind == StepKind::kBarrier ? CollectiveKind::kBarrier : CollectiveKind::kBroadcast;
        if (st.kind == StepKind::kReduce) k = CollectiveKind::kReduce;
        if (st.kind == StepKind::kAllReduce) k = CollectiveKind::kAllReduce;
        if (st.kind == StepKind::kScatter) k = CollectiveKind::kScatter;
        if (st.kind == StepKind::kGather) k = CollectiveKind::kGather;
        if (st.kind == StepKind::kAllGather || st.kind == StepKind::kAllGatherIntoTensor) k = CollectiveKind::kAllGather;
        if (st.kind == StepKind::kReduceScatter || st.kind == StepKind::kReduceScatterTensor)
          k = CollectiveKind::kReduceScatter;
        if (st.kind == StepKind::kAllToAll || st.kind == StepKind::kAllToAllSingle) k = CollectiveKind::kAllToAll;
        if (!algorithm_supports(st.algorithm, k))
          r_.fail(st.where, "algorithm '" + std::string(algorithm_name(st.algorithm)) + "' does not implement " + step_kind_name(st.kind));
      }
      for (int r = 0; r < W; ++r) {
        if (only_rank && r != *only_rank) continue;
        if (st.ranks && std::find(st.ranks->begin(), st.ranks->end(), r) == st.ranks->end()) continue;
        const auto vars = vars_for(r, W);
        if (st.when && st.when->eval(vars) == 0) continue;
        const bool member = std::binary_search(members.begin(), members.end(), r);
        const std::string on = " on rank " + std::to_string(r);
        if (st.tag.valid() && (st.kind == StepKind::kSend || st.kind == StepKind::kIsend || st.kind == StepKind::kRecv || st.kind == StepKind::kIrecv)) {
          const double tag = st.tag.eval(vars);
          if (!integral(tag) || tag < 0 || tag > 2147483647.0)
            r_.fail(st.where, "tag " + st.tag.text() + " is " + as_written(tag) + on + "; tags are integers from 0 to 2147483647");
        }
        if (st.peer && member) {
          const double p = st.peer->eval(vars);
          const bool is_root = collective;
          const std::string what = is_root ? "root" : (st.kind == StepKind::kRecv || st.kind == StepKind::kIrecv ? "src" : "dst");
          if (!integral(p) || p < 0 || p >= W)
            r_.fail(st.where, what + " " + st.peer->text() + " is " + as_written(p) + on +
                                  ", out of range for world " + std::to_string(W));
          if (!std::binary_search(members.begin(), members.end(), static_cast<int>(p)))
            r_.fail(st.where, what + " " + std::to_string(static_cast<int>(p)) + on + " is not a member of " + gname);
          if (st.kind == StepKind::kSend && static_cast<int>(p) == r)
            r_.fail(st.where, "blocking send to itself" + on + " can never complete; use isend and irecv");
        }
        if (member && (st.kind == StepKind::kScatter || st.kind == StepKind::kGather || st.kind == StepKind::kAllGather)) {
          const TensorSpec* l = s.find_tensor(st.list);
          const int root = st.peer ? static_cast<int>(st.peer->eval(vars)) : -1;
          const bool needs_list = st.kind == StepKind::kAllGather || root == r;
          const double n = l->list->eval(vars);
          if (needs_list && static_cast<std::size_t>(n) != members.size())
            r_.fail(st.where, "list '" + l->name + "' has " + as_written(n) + " tensors but " +
                                  gname + " has " + std::to_string(members.size()) + " ranks");
        }
        if (member && (st.kind == StepKind::kReduceScatter || st.kind == StepKind::kAllToAll)) {
          for (const std::string* name : {&st.list, &st.output}) {
            const TensorSpec* l = s.find_tensor(*name);
            if (!l->list) continue;  // reduce_scatter's output
            const double n = l->list->eval(vars);
            if (static_cast<std::size_t>(n) != members.size())
              r_.fail(st.where, std::string(name == &st.list ? "list '" : "output '") + l->name + "' has " +
                                    as_written(n) + " tensors but " + gname + " has " + std::to_string(members.size()) +
                                    " ranks");
          }
        }
        if (member && st.kind == StepKind::kReduceScatterTensor) {
          const TensorSpec* in = s.find_tensor(st.tensor);
          const TensorSpec* out = s.find_tensor(st.output);
          if (in->count() != members.size() * out->count())
            r_.fail(st.where, "tensor '" + in->name + "' has " + std::to_string(in->count()) + " elements but " + gname +
                                  " has " + std::to_string(members.size()) + " ranks of " + std::to_string(out->count()) +
                                  " (give it shape [" + std::to_string(members.size() * out->count()) +
                                  "], or an expression of world)");
        }
        if (member && st.kind == StepKind::kAllToAllSingle) {
          check_splits(st, st.input_splits, "input_split_sizes", *s.find_tensor(st.tensor), r, W, members.size(), gname);
          check_splits(st, st.output_splits, "output_split_sizes", *s.find_tensor(st.output), r, W, members.size(),
                       gname);
        }
        if (member && st.kind == StepKind::kAllGatherIntoTensor) {
          const TensorSpec* in = s.find_tensor(st.tensor);
          const TensorSpec* out = s.find_tensor(st.output);
          if (out->count() != members.size() * in->count())
            r_.fail(st.where, "output '" + out->name + "' has " + std::to_string(out->count()) + " elements but " + gname +
                                  " has " + std::to_string(members.size()) + " ranks of " + std::to_string(in->count()) +
                                  " (give it shape [" + std::to_string(members.size() * in->count()) +
                                  "], or an expression of world)");
        }
        if (st.kind == StepKind::kPrint) {
          std::optional<PrintTextError> error;
          for (const PrintPart& p : parse_print_text(st.text, &error)) {
            const TensorSpec* l = p.is_field && p.index && !p.source ? s.find_tensor(p.text) : nullptr;
            if (!l || !l->list) continue;
            const double n = l->list->eval(vars);
            Location where = st.text_where.line > 0 ? st.text_where : st.where;
            where.column += static_cast<int>(p.offset);
            if (static_cast<double>(*p.index) >= n)
              r_.fail(where, "print: {" + p.text + "[" + std::to_string(*p.index) + "]}: list '" + l->name + "' has " +
                                 as_written(n) + " tensors" + on);
          }
        }
        if (st.source) {
          const double src = st.source->eval(vars);
          if (!integral(src) || src < 0 || src >= W)
            r_.fail(st.where, "source " + st.source->text() + " is out of range for world " + std::to_string(W));
        }
      }
    }
  };
  check_prog(s.program, std::nullopt);
  for (const auto& [rank, prog] : s.programs) check_prog(prog, rank);
}

}  // namespace

std::size_t TensorSpec::count() const {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

const TensorSpec* Scenario::find_tensor(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

const GroupSpec* Scenario::find_group(const std::string& n) const {
  for (const auto& g : groups)
    if (g.name == n) return &g;
  return nullptr;
}

std::optional<std::string> value_unfit(DType dtype, double x) {
  if (is_floating(dtype) || dtype == DType::kBool) return std::nullopt;
  if (!std::isfinite(x)) return python_float(x) + " is not a value of " + std::string(dtype_name(dtype));
  double lo = 0, hi = 0;  // [lo, hi): the integers the dtype holds
  const char* range = "";
  switch (dtype) {
    case DType::kInt8: lo = -128, hi = 128, range = "-128 to 127"; break;
    case DType::kUInt8: lo = 0, hi = 256, range = "0 to 255"; break;
    case DType::kInt32: lo = -2147483648.0, hi = 2147483648.0, range = "-2147483648 to 2147483647"; break;
    case DType::kInt64:
      lo = -9223372036854775808.0, hi = 9223372036854775808.0, range = "-2**63 to 2**63 - 1";
      break;
    default: return std::nullopt;
  }
  const double v = std::trunc(x);
  if (v >= lo && v < hi) return std::nullopt;
  return python_float(x) + " does not fit " + std::string(dtype_name(dtype)) + " (" + range + ")";
}

std::vector<double> SplitSizes::eval(int rank, int world, std::size_t n) const {
  std::map<std::string, double> v = {{"rank", static_cast<double>(rank)}, {"world", static_cast<double>(world)}};
  std::vector<double> out;
  if (!of_j) {
    for (const Expr& e : each) out.push_back(e.eval(v));
    return out;
  }
  for (std::size_t j = 0; j < n; ++j) {
    v["j"] = static_cast<double>(j);
    out.push_back(of_j->eval(v));
  }
  return out;
}

std::string step_kind_name(StepKind k) {
  for (const auto& d : step_table())
    if (d.kind == k) return d.name;
  return "?";
}

Scenario load_text(const std::string& text, const std::string& file_name, const LoadOverrides& overrides) {
  Loader l(file_name, overrides);
  return l.load(text);
}

std::string read_scenario_file(const std::string& path, const char* what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw ScenarioError(Location{path, 0, 0}, std::string("cannot read the ") + what + ": no such file");
  if (!std::filesystem::is_regular_file(st))
    throw ScenarioError(Location{path, 0, 0}, std::string("the ") + what + " is not a regular file (a device, pipe or folder)");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxScenarioFileBytes)
    throw ScenarioError(Location{path, 0, 0}, std::string("the ") + what + " is " + std::to_string(size) +
                                                  " bytes; scenario files are at most " +
                                                  std::to_string(kMaxScenarioFileBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(Location{path, 0, 0}, std::string("cannot read the ") + what);
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

Scenario load_file(const std::string& path, const LoadOverrides& overrides) {
  return load_text(read_scenario_file(path, "file"), path, overrides);
}

void evaluate_shape(TensorSpec& t, int world, const Location& where) {
  if (t.shape_exprs.empty()) return;
  t.shape.clear();
  for (const Expr& e : t.shape_exprs) {
    const double d = e.eval({{"world", static_cast<double>(world)}});
    if (!(d >= 0 && d <= static_cast<double>(1ll << 31)) || d != static_cast<double>(static_cast<std::int64_t>(d)))
      throw ScenarioError(where, "tensor '" + t.name + "': shape dimension " + e.text() + (e.text() == as_written(d) ? "" : " is " + as_written(d)) +
                                     " for world " + std::to_string(world) + "; dimensions are integers between 0 and 2^31");
    t.shape.push_back(static_cast<std::int64_t>(d));
  }
}

sim::NetworkModel load_profile(const std::string& path) {
  return Loader(path).profile(read_scenario_file(path, "network profile"));
}

}  // namespace collie::scenario
