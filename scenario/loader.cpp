#include "scenario/loader.h"

#include "core/tensor.h"
#include "scenario/print_text.h"
#include "scenario/program_checks.h"
#include "scenario/yaml_reader.h"

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
const std::vector<std::string> kShapeVars = {"rank", "world"};
const std::vector<std::string> kInitVars = {"rank", "world", "i", "j"};
const std::vector<std::string> kUpdateVars = {"rank", "world", "i", "j", "x"};
const std::vector<std::string> kSplitVars = {"rank", "world", "j"};

const std::vector<std::string> kTopKeys = {"version", "name", "description", "world", "backend", "seed", "check", "timing_only",
                                           "conformance", "feature", "network", "groups", "tensors", "program",
                                           "programs", "outcome", "faults", "timeout_us", "unspecified",
                                           "unspecified_outcome", "transport_only",
                                           "virtual_clock_only"};

// Larger files are refused before they are read (a scenario is a few KiB;
// /dev/zero is not one).
constexpr std::uintmax_t kMaxScenarioFileBytes = 16u << 20;

}  // namespace
void evaluate_shape(TensorSpec& t, int world, const Location& where);
namespace {

const std::vector<std::string> kCommonStepKeys = {"op", "ranks", "if"};

// The keys a step of each control kind takes (besides op, ranks and if).
struct ControlStep {
  StepKind kind;
  std::string_view name;
  std::vector<std::string> keys;
};
const std::vector<ControlStep>& control_steps() {
  static const std::vector<ControlStep> t = {
      {StepKind::kWait, "wait", {"handle", "handles"}},
      {StepKind::kNewGroup, "new_group", {"name", "members"}},
      {StepKind::kDestroyGroup, "destroy_group", {"group"}},
      {StepKind::kPrint, "print", {"text", "unspecified"}},
      {StepKind::kExpect, "expect", {"tensor", "equals", "value", "tolerance", "handle", "source", "unspecified"}},
      {StepKind::kUpdate, "update", {"tensor", "value"}},
  };
  return t;
}

// The keys an op step takes (besides op, ranks and if), from core/op.h's
// table: its operands, its peer or root, and the arguments it takes.
std::vector<std::string> op_step_keys(const OpSpec& s, bool async_form) {
  std::vector<std::string> keys;
  for (std::size_t k = 0; k < kNumSlots; ++k)
    if (s.operand(static_cast<Slot>(k)).present()) keys.emplace_back(slot_name(static_cast<Slot>(k)));
  if (!s.peer_key.empty()) keys.emplace_back(s.peer_key);
  if (s.tag) keys.emplace_back("tag");
  if (s.reduce_op) keys.emplace_back("reduce_op");
  if (s.splits) {
    keys.emplace_back("output_split_sizes");
    keys.emplace_back("input_split_sizes");
  }
  keys.emplace_back("group");
  // The async form: the one named so (isend), or async_op=True by a handle.
  if (async_form || (s.async && s.async_name.empty())) {
    keys.emplace_back("handle");
    if (s.family != OpFamily::kBatch) keys.emplace_back("poll_ms");
  }
  if (s.algorithm) keys.emplace_back("algorithm");
  if (s.timeout) keys.emplace_back("timeout_us");
  if (s.family == OpFamily::kBatch) keys.emplace_back("ops");
  if (s.kind == OpKind::kMonitoredBarrier) keys.emplace_back("wait_all_ranks");
  return keys;
}

// Every name a step's `op` takes: the ops' and the program's own.
std::vector<std::string> step_names() {
  std::vector<std::string> names = op_names();
  for (const auto& c : control_steps()) names.emplace_back(c.name);
  return names;
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
    // Every problem is kept and reported (errors_), part by part: a key,
    // a tensor, a group, a fault, a step. The program's checks run only on
    // a file whose parts all read, and report every problem they find.
    errors_.attempt([&] { r_.check_keys(doc, kTopKeys, "the scenario"); });
    Scenario s;
    s.file = file_;
    s.where = r_.at(doc);
    errors_.attempt([&] {
      const YAML::Node v = r_.require(doc, "version", "a scenario");
      s.version = static_cast<int>(r_.as_int(v, "version"));
      if (s.version != kFormatVersion)
        r_.fail(v, "unsupported format version " + std::to_string(s.version) + "; this collie reads version 1");
    });
    errors_.attempt([&] { s.name = r_.as_string(r_.require(doc, "name", "a scenario"), "name"); });
    errors_.attempt([&] { if (doc["description"]) s.description = r_.as_string(doc["description"], "description"); });
    const bool world_read = errors_.attempt([&] {
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
    });
    if (!world_read) errors_.rethrow();  // shapes and ranks are read against the world
    errors_.attempt([&] { if (doc["unspecified"]) s.unspecified = r_.as_string(doc["unspecified"], "unspecified"); });
    errors_.attempt([&] {
      if (!doc["unspecified_outcome"]) return;
      if (doc["unspecified"])
        r_.fail(doc["unspecified_outcome"],
                "a scenario has 'unspecified' (all it checks) or 'unspecified_outcome' (only how it ends), not both");
      s.unspecified_outcome = r_.as_string(doc["unspecified_outcome"], "unspecified_outcome");
    });
    errors_.attempt([&] {
      if (doc["transport_only"]) s.transport_only = r_.as_string(doc["transport_only"], "transport_only");
    });
    errors_.attempt([&] {
      if (doc["virtual_clock_only"])
        s.virtual_clock_only = r_.as_string(doc["virtual_clock_only"], "virtual_clock_only");
    });
    errors_.attempt([&] { if (doc["backend"]) s.backend = r_.as_string(doc["backend"], "backend"); });
    errors_.attempt([&] { if (doc["seed"]) s.seed = r_.as_u64(doc["seed"], "seed"); });
    errors_.attempt([&] { if (doc["check"]) s.check = r_.as_bool(doc["check"], "check"); });
    errors_.attempt([&] { if (doc["timing_only"]) s.timing_only = r_.as_bool(doc["timing_only"], "timing_only"); });
    errors_.attempt([&] { if (doc["conformance"]) s.conformance = r_.as_bool(doc["conformance"], "conformance"); });
    errors_.attempt([&] { if (doc["feature"]) s.feature = r_.as_string(doc["feature"], "feature"); });
    errors_.attempt([&] { if (doc["network"]) s.network = network(doc["network"]); });
    errors_.attempt([&] { if (doc["faults"] && !doc["faults"].IsNull()) s.faults = faults(doc["faults"]); });
    errors_.attempt([&] {
      if (!doc["timeout_us"]) return;
      const double t = r_.as_double(doc["timeout_us"], "timeout_us");
      if (!(t > 0)) r_.fail(doc["timeout_us"], "timeout_us must be > 0");
      s.timeout_ns = static_cast<Nanos>(t * 1000);
    });
    errors_.attempt([&] { if (doc["groups"]) groups(doc["groups"], s); });
    errors_.attempt([&] { if (doc["tensors"]) tensors(doc["tensors"], s); });
    errors_.attempt([&] {
      if (doc["program"] && doc["programs"])
        r_.fail(doc["programs"], "a scenario has either 'program' (every rank) or 'programs' (per rank), not both");
      if (doc["program"]) {
        s.program = steps(doc["program"], "program");
      } else if (doc["programs"]) {
        const YAML::Node p = doc["programs"];
        r_.expect_map(p, "programs");
        for (auto it = p.begin(); it != p.end(); ++it) {
          errors_.attempt([&] {
            const int rank = static_cast<int>(r_.as_int(it->first, "a key of programs (a rank)"));
            if (s.programs.count(rank)) r_.fail(it->first, "rank " + std::to_string(rank) + " has two programs");
            s.program_where[rank] = r_.at(it->first);
            s.programs[rank] = steps(it->second, "the program of rank " + std::to_string(rank));
          });
        }
      } else {
        r_.fail(doc, "a scenario needs 'program' (steps every rank runs) or 'programs' (steps per rank)");
      }
    });
    errors_.attempt([&] { if (doc["outcome"]) s.outcome = outcome(doc["outcome"]); });
    errors_.rethrow();
    check_program(s);
    return s;
  }

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
    for (const auto& f : n) errors_.attempt([&] {
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
    });
    return plan;
  }

  void groups(const YAML::Node& n, Scenario& s) {
    r_.expect_map(n, "groups");
    for (auto it = n.begin(); it != n.end(); ++it) errors_.attempt([&] {
      GroupSpec g;
      g.name = r_.as_string(it->first, "a group name");
      g.where = r_.at(it->first);
      if (g.name == "world") r_.fail(it->first, "'world' is the name of the whole world; choose another group name");
      if (s.find_group(g.name)) r_.fail(it->first, "group '" + g.name + "' is defined twice");
      g.ranks = r_.as_rank_list(it->second, "group '" + g.name + "'");
      g.ranks_where = r_.at(it->second);
      s.groups.push_back(std::move(g));
    });
  }

  void tensors(const YAML::Node& n, Scenario& s) {
    r_.expect_map(n, "tensors");
    for (auto it = n.begin(); it != n.end(); ++it) errors_.attempt([&] {
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
        for (const auto& e : t.shape_exprs) {
          constant = constant && e.is_constant();
          t.per_rank = t.per_rank || e.uses("rank");
        }
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
        if (t.per_rank) r_.fail(vs, what + "'s shape depends on the rank, so it has no one list of values; give 'init'");
        for (const auto& e : vs) {
          t.values.push_back(r_.as_value(e, "each of values"));
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
    });
  }

  std::vector<Step> steps(const YAML::Node& n, const std::string& what) {
    if (!n.IsSequence()) r_.fail(n, what + " must be a list of steps, not " + Reader::kind_of(n));
    std::vector<Step> out;
    for (const auto& e : n) errors_.attempt([&] { out.push_back(step(e)); });
    return out;
  }

  Step step(const YAML::Node& n) {
    r_.expect_map(n, "a step");
    const YAML::Node opn = r_.require(n, "op", "a step");
    const std::string op = r_.as_string(opn, "op");
    Step s;
    s.where = r_.at(n);
    std::vector<std::string> allowed = kCommonStepKeys;
    const std::optional<NamedOp> named = parse_op(op);
    if (named) {
      s.kind = StepKind::kOp;
      s.op = named->kind;
      s.async = named->async;
      const std::vector<std::string> keys = op_step_keys(s.spec(), named->async);
      allowed.insert(allowed.end(), keys.begin(), keys.end());
    } else {
      const ControlStep* c = nullptr;
      for (const auto& d : control_steps())
        if (op == d.name) c = &d;
      if (!c) r_.fail(opn, "unknown op '" + op + "'" + did_you_mean(op, step_names()));
      s.kind = c->kind;
      allowed.insert(allowed.end(), c->keys.begin(), c->keys.end());
    }
    r_.check_keys(n, allowed, "a '" + op + "' step");
    const std::string what = "'" + op + "'";
    if (n["ranks"]) s.ranks = r_.as_rank_list(n["ranks"], "ranks");
    if (n["if"]) s.when = r_.as_expr(n["if"], "if", kPeerVars);
    auto need = [&](const char* key) { return r_.require(n, key, "a " + what + " step"); };
    auto str = [&](const char* key) { return r_.as_string(n[key], key); };
    if (s.kind == StepKind::kOp) op_arguments(n, s, need);
    if (n["tensor"] && s.tensor.empty()) s.tensor = str("tensor");
    if (n["group"]) s.group = str("group");
    if (n["handle"]) s.handle = str("handle");
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
      case StepKind::kDestroyGroup:
        if (n["ranks"] || n["if"])
          r_.fail(n["ranks"] ? n["ranks"] : n["if"],
                  "every rank destroys a group, as every rank made it (torch's rule): 'destroy_group' takes no "
                  "'ranks' or 'if'");
        if (s.group == "world")
          r_.fail(n["group"], "the world cannot be destroyed as a group (torch's destroy_process_group() without "
                              "a group ends the whole job)");
        need("group");
        break;
      case StepKind::kPrint: {
        const YAML::Node text = need("text");
        s.text = r_.as_string(text, "text");
        s.text_where = r_.at(text);
        if (text.Tag() == "!") s.text_where.column += 1;  // quoted: point inside the quotes
        if (n["unspecified"]) s.unspecified = r_.as_string(n["unspecified"], "unspecified");
        break;
      }
      case StepKind::kUpdate:
        s.tensor = r_.as_string(need("tensor"), "tensor");
        s.value = r_.as_expr(need("value"), "value", kUpdateVars);
        s.has_value = true;
        break;
      case StepKind::kExpect:
        if (n["equals"] && n["value"]) r_.fail(n["value"], "an 'expect' step takes 'equals' or 'value', not both");
        if (n["equals"]) {
          const YAML::Node e = n["equals"];
          if (e.IsSequence()) {
            for (const auto& x : e) {
              s.equals.push_back(r_.as_value(x, "each of equals"));
              s.equals_where.push_back(r_.at(x));
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
    return s;
  }

  // An op step's arguments, as core/op.h's table says the op takes them.
  template <typename Need>
  void op_arguments(const YAML::Node& n, Step& s, Need need) {
    const OpSpec& spec = s.spec();
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      if (!spec.operand(slot).present()) continue;
      const std::string key(slot_name(slot));
      const std::string name = r_.as_string(need(key.c_str()), key);
      (slot == Slot::kTensor ? s.tensor : slot == Slot::kList ? s.list : s.output) = name;
    }
    s.tag = Expr::constant(0);
    if (n["tag"]) s.tag = r_.as_expr(n["tag"], "tag", kPeerVars);
    if (!spec.peer_key.empty()) {
      const std::string key(spec.peer_key);
      if (spec.any_source && !n[key]) {
        s.any_source = true;
      } else {
        const YAML::Node p = need(key.c_str());
        if (spec.any_source && p.IsScalar() && (p.Scalar() == "any" || p.Scalar() == "ANY")) s.any_source = true;
        else s.peer = r_.as_expr(p, key, kPeerVars);
      }
    }
    if (spec.splits) {
      if (n["output_split_sizes"]) s.output_splits = split_sizes(n["output_split_sizes"], "output_split_sizes");
      if (n["input_split_sizes"]) s.input_splits = split_sizes(n["input_split_sizes"], "input_split_sizes");
    }
    // The form named for async use (isend) keeps a handle; a collective
    // given one is async_op=True.
    if (s.async) need("handle");
    if (n["handle"] && spec.async_name.empty()) s.async = true;
    if (n["reduce_op"]) {
      const std::string name = r_.as_string(n["reduce_op"], "reduce_op");
      auto o = parse_reduce_op(name);
      std::vector<std::string> names;
      for (int i = 0; i < kNumReduceOps; ++i) names.emplace_back(reduce_op_name(static_cast<ReduceOp>(i)));
      if (!o) r_.fail(n["reduce_op"], "unknown reduce_op '" + name + "'" + did_you_mean(name, names));
      s.reduce_op = *o;
    }
    if (n["timeout_us"]) {
      const double t = r_.as_double(n["timeout_us"], "timeout_us");
      if (!(t > 0)) r_.fail(n["timeout_us"], "timeout_us must be > 0");
      s.timeout_ns = static_cast<Nanos>(t * 1000);
    }
    if (n["poll_ms"]) {
      if (!s.async) r_.fail(n["poll_ms"], "poll_ms polls an async op's handle before its wait: give the step a handle");
      const double t = r_.as_double(n["poll_ms"], "poll_ms");
      if (!(t > 0)) r_.fail(n["poll_ms"], "poll_ms must be > 0");
      s.poll_ns = static_cast<Nanos>(t * 1'000'000);
    }
    if (n["algorithm"]) {
      const std::string name = r_.as_string(n["algorithm"], "algorithm");
      auto a = parse_algorithm(name);
      std::vector<std::string> names;
      for (Algorithm x : algorithms_for(spec.collective)) names.emplace_back(algorithm_name(x));
      if (!a) r_.fail(n["algorithm"], "unknown algorithm '" + name + "'" + did_you_mean(name, names));
      s.algorithm = *a;
    }
    if (n["wait_all_ranks"]) s.wait_all_ranks = r_.as_bool(n["wait_all_ranks"], "wait_all_ranks");
    if (spec.family == OpFamily::kBatch) s.p2p = batch_ops(need("ops"));
  }

  // batch_isend_irecv's ops: a list of {op: isend|irecv, tensor, dst|src, tag}.
  std::vector<P2PStep> batch_ops(const YAML::Node& n) {
    if (!n.IsSequence()) r_.fail(n, "ops must be a list of {op: isend, tensor: T, dst: R} or {op: irecv, tensor: T, "
                                    "src: R}, not " + Reader::kind_of(n));
    std::vector<P2PStep> ops;
    for (const auto& e : n) {
      r_.expect_map(e, "each of ops");
      P2PStep p;
      p.where = r_.at(e);
      const std::string op = r_.as_string(r_.require(e, "op", "each of ops"), "op");
      if (op != "isend" && op != "irecv")
        r_.fail(e["op"], "ops of batch_isend_irecv are 'isend' or 'irecv', not '" + op + "'" +
                             did_you_mean(op, {"isend", "irecv"}));
      p.is_send = op == "isend";
      const char* peer = p.is_send ? "dst" : "src";
      r_.check_keys(e, {"op", "tensor", peer, "tag"}, "an '" + op + "' of ops");
      p.tensor = r_.as_string(r_.require(e, "tensor", "an '" + op + "' of ops"), "tensor");
      p.peer = r_.as_expr(r_.require(e, peer, "an '" + op + "' of ops"), peer, kPeerVars);
      p.tag = e["tag"] ? r_.as_expr(e["tag"], "tag", kPeerVars) : Expr::constant(0);
      ops.push_back(std::move(p));
    }
    if (ops.empty()) r_.fail(n, "ops lists no op; batch_isend_irecv needs at least one");
    return ops;
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

 private:
  Reader r_;
  std::string file_;
  LoadOverrides overrides_;
  ScenarioErrors errors_;  // every problem found while reading
};

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

std::vector<Value> SplitSizes::eval(int rank, int world, std::size_t n) const {
  Vars v = {{"rank", rank}, {"world", world}};
  std::vector<Value> out;
  if (!of_j) {
    for (const Expr& e : each) out.push_back(e.eval(v));
    return out;
  }
  for (std::size_t j = 0; j < n; ++j) {
    v["j"] = j;
    out.push_back(of_j->eval(v));
  }
  return out;
}

const std::string& Step::slot(Slot s) const {
  switch (s) {
    case Slot::kTensor: return tensor;
    case Slot::kList: return list;
    case Slot::kOutput: return output;
  }
  return tensor;
}

std::string Step::kind_name() const {
  switch (kind) {
    case StepKind::kOp: return std::string(op_name(op, async));
    case StepKind::kWait: return "wait";
    case StepKind::kNewGroup: return "new_group";
    case StepKind::kDestroyGroup: return "destroy_group";
    case StepKind::kPrint: return "print";
    case StepKind::kExpect: return "expect";
    case StepKind::kUpdate: return "update";
  }
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

namespace {

// The shape of `t` on `rank`, checked: whole dimensions from 0 to 2^31
// whose product of bytes -- not only each -- is at most kMaxTensorBytes.
std::vector<std::int64_t> checked_shape(const TensorSpec& t, int rank, int world, const Location& where) {
  bool uses_world = false;
  for (const Expr& e : t.shape_exprs) uses_world = uses_world || e.uses("world");
  const std::string on = (t.per_rank ? " on rank " + std::to_string(rank) : std::string()) +
                         (uses_world ? " for world " + std::to_string(world) : std::string());
  std::vector<std::int64_t> shape;
  std::uint64_t elements = 1;
  bool overflow = false;
  for (const Expr& e : t.shape_exprs) {
    const Value d = e.eval({{"rank", rank}, {"world", world}});
    const std::optional<std::int64_t> whole = d.whole();
    if (!whole || *whole < 0 || *whole > (std::int64_t{1} << 31))
      throw ScenarioError(where, "tensor '" + t.name + "': shape dimension " + e.text() +
                                     (e.text() == as_written(d) ? "" : " is " + as_written(d)) + on +
                                     "; dimensions are integers between 0 and 2^31");
    shape.push_back(*whole);
    overflow = overflow || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(*whole), &elements);
  }
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {  // empty, however large the rest
    overflow = false;
    elements = 0;
  }
  // The product, not only each dimension: [65536, 65536, 65536, 65536]
  // has 2^64 elements (0 after wrapping), [3, 2^31, 2^31] 3 x 2^62.
  std::uint64_t bytes = 0;
  if (overflow || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype_size(t.dtype)), &bytes) ||
      bytes > kMaxTensorBytes) {
    std::string dims;
    for (std::int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    throw ScenarioError(where, "tensor '" + t.name + "': shape [" + dims + "]" + on + " has " +
                                   (overflow ? std::string("more than 2^64") : std::to_string(elements)) + " elements of " +
                                   std::string(dtype_name(t.dtype)) + "; a tensor holds at most 2^50 bytes (1 PiB)");
  }
  return shape;
}

}  // namespace

void evaluate_shape(TensorSpec& t, int world, const Location& where) {
  if (t.shape_exprs.empty()) return;
  t.world = world;
  t.shape = checked_shape(t, 0, world, where);
  if (t.per_rank)
    for (int r = 1; r < world; ++r) (void)checked_shape(t, r, world, where);
}

std::vector<std::int64_t> TensorSpec::shape_on(int rank) const {
  if (!per_rank) return shape;
  std::vector<std::int64_t> out;
  for (const Expr& e : shape_exprs) out.push_back(e.eval({{"rank", rank}, {"world", world}}).whole().value_or(0));
  return out;  // checked when loaded
}

std::size_t TensorSpec::count_on(int rank) const {
  if (!per_rank) return count();
  std::size_t n = 1;
  for (std::int64_t d : shape_on(rank)) n *= static_cast<std::size_t>(d);  // bounded when loaded
  return n;
}

sim::NetworkModel load_profile(const std::string& path) {
  return Loader(path).profile(read_scenario_file(path, "network profile"));
}

}  // namespace collie::scenario
