#include "scenario/search.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "core/text.h"
#include "scenario/loader.h"
#include "sim/explorer.h"

namespace collie::scenario {

std::string failure_signature(const ScenarioResult& r) {
  static const std::regex times(R"(t=[0-9]+ns|since t=[0-9]+ns|[0-9]+ us\b)");
  std::string s = r.outcome;
  if (r.outcome == "deadlock") {
    s += " |";
    for (const auto& c : r.causes) s += " " + c + ";";
  } else if (r.outcome == "error") {
    s += " | " + r.detail.substr(0, r.detail.find('\n'));
  }
  // The first wrong value, without the file position (which moves when a
  // shrinker removes steps): "rank 0: expect got: element 0 is 2, expected 1".
  static const std::regex position(R"(^[^:]*:[0-9]+:[0-9]+: )");
  for (const auto& f : r.failures) {
    const bool wrong = f.find("the oracle says") != std::string::npos ||
                       f.find("differs from what was sent") != std::string::npos ||
                       f.find(": expect ") != std::string::npos;
    if (wrong) {
      s += " | " + std::regex_replace(f.substr(0, f.find('\n')), position, "");
      break;
    }
  }
  return std::regex_replace(s, times, "");
}

namespace {

bool data_failure(const ScenarioResult& r) {
  for (const auto& f : r.failures)
    if (f.find("the oracle says") != std::string::npos || f.find("differs from what was sent") != std::string::npos ||
        f.find(": expect ") != std::string::npos || f.find("results differ between rank") != std::string::npos)
      return true;
  return false;
}

}  // namespace

FuzzResult fuzz(const Scenario& s, const FuzzOptions& o) {
  FuzzResult res;
  const std::size_t total = o.last_seed >= o.first_seed ? o.last_seed - o.first_seed + 1 : 0;
  for (std::uint64_t seed = o.first_seed; seed <= o.last_seed && seed >= o.first_seed; ++seed) {
    if (o.progress) o.progress(seed, res.runs, total);
    RunOptions ro = o.base;
    ro.seed = seed;
    ro.random_faults_seed = seed;
    ro.destructive_faults = o.destructive;
    ScenarioResult r = run_scenario(s, ro);
    ++res.runs;
    const bool failed = o.destructive ? data_failure(r) : !r.passed;
    if (failed) res.failures.push_back(FuzzFailure{seed, std::move(r)});
    if (seed == std::numeric_limits<std::uint64_t>::max()) break;
  }
  return res;
}

namespace {

// "drop:p=1,src=0,nth=2" -> {fault: drop, p: 1, src: 0, nth: 2}; a+b -> [a, b].
YAML::Node fault_node(const std::string& arg) {
  YAML::Node n(YAML::NodeType::Map);
  const auto colon = arg.find(':');
  n["fault"] = arg.substr(0, colon);
  std::stringstream ss(arg.substr(colon + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (v.find('+') != std::string::npos || k == "a" || k == "b") {
      if (k == "a" || k == "b") {
        YAML::Node list(YAML::NodeType::Sequence);
        std::stringstream vs(v);
        std::string r;
        while (std::getline(vs, r, '+')) list.push_back(r);
        n[k] = list;
        continue;
      }
    }
    n[k] = v;
  }
  return n;
}

}  // namespace

std::string shrink(const std::string& path, std::uint64_t seed, bool destructive, const RunOptions& base,
                   std::string* summary) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  YAML::Node doc = YAML::Load(text.str());
  const Scenario original = load_text(text.str(), path);

  // The failure to preserve.
  RunOptions first = base;
  first.seed = seed;
  first.random_faults_seed = seed;
  first.destructive_faults = destructive;
  const ScenarioResult failing = run_scenario(original, first);
  const std::string want = failure_signature(failing);

  // Make every fault explicit in the document.
  sim::FaultPlan plan = original.faults;
  {
    const sim::FaultPlan random = sim::random_fault_plan(seed, original.world, destructive);
    for (const auto& a : sim::fault_args(random)) {
      if (auto err = sim::parse_fault(a, plan)) throw std::logic_error(*err);
    }
  }
  std::vector<std::string> faults = sim::fault_args(plan);
  doc["seed"] = seed;

  auto set_faults = [&](YAML::Node& d, const std::vector<std::string>& fs) {
    if (fs.empty()) {
      d.remove("faults");
      return;
    }
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& f : fs) list.push_back(fault_node(f));
    d["faults"] = list;
  };
  RunOptions plain = base;
  plain.seed = seed;
  auto still_fails = [&](YAML::Node d) {
    const std::string t = YAML::Dump(d);
    try {
      const Scenario s = load_text(t, path);
      const ScenarioResult r = run_scenario(s, plain);
      return failure_signature(r) == want;
    } catch (const std::exception&) {
      return false;
    }
  };
  std::ostringstream log;
  set_faults(doc, faults);
  if (!still_fails(doc)) {
    log << "the failure does not reproduce with the faults made explicit; nothing was removed\n";
    if (summary) *summary = log.str();
    return YAML::Dump(doc);
  }
  // Faults, one at a time.
  for (std::size_t i = 0; i < faults.size();) {
    std::vector<std::string> fewer = faults;
    fewer.erase(fewer.begin() + static_cast<long>(i));
    YAML::Node d = YAML::Clone(doc);
    set_faults(d, fewer);
    if (still_fails(d)) {
      log << "removed fault " << faults[i] << "\n";
      faults = fewer;
      doc = d;
    } else {
      ++i;
    }
  }
  // Program steps, one at a time.
  // `get` finds the step list in a document, `put` replaces it.
  auto shrink_steps = [&](const std::string& where, std::function<YAML::Node(YAML::Node&)> get,
                          std::function<void(YAML::Node&, const YAML::Node&)> put) {
    for (std::size_t i = 0;;) {
      YAML::Node steps = get(doc);
      if (!steps || !steps.IsSequence() || i >= steps.size()) break;
      YAML::Node d = YAML::Clone(doc);
      YAML::Node target = get(d);
      YAML::Node kept(YAML::NodeType::Sequence);
      for (std::size_t j = 0; j < target.size(); ++j)
        if (j != i) kept.push_back(YAML::Clone(target[j]));
      put(d, kept);
      if (still_fails(d)) {
        log << "removed step " << i + 1 << " of " << where << "\n";
        doc = d;
      } else {
        ++i;
      }
    }
  };
  if (doc["program"])
    shrink_steps(
        "program", [](YAML::Node& d) { return d["program"]; },
        [](YAML::Node& d, const YAML::Node& v) { d["program"] = v; });
  if (doc["programs"]) {
    std::vector<std::string> ranks;
    for (auto it = doc["programs"].begin(); it != doc["programs"].end(); ++it) ranks.push_back(it->first.as<std::string>());
    for (const auto& r : ranks)
      shrink_steps(
          "the program of rank " + r, [r](YAML::Node& d) { return d["programs"][r]; },
          [r](YAML::Node& d, const YAML::Node& v) { d["programs"][r] = v; });
  }
  log << "kept " << faults.size() << " fault" << (faults.size() == 1 ? "" : "s") << "; the run still fails as: " << want
      << "\n";
  if (summary) *summary = log.str();
  std::string out = "# Shrunk by collie fuzz --shrink from " + path + " (seed " + std::to_string(seed) + ").\n";
  out += YAML::Dump(doc) + "\n";
  return out;
}

const char* buffering_flag(Buffering b) {
  switch (b) {
    case Buffering::kConfigured: return "configured";
    case Buffering::kRendezvous: return "rendezvous";
    case Buffering::kEager: return "eager";
  }
  return "configured";
}

std::string explore_replay(const std::string& file, const ExploreFinding& f) {
  std::string sched;
  for (std::size_t k = 0; k < f.schedule.size(); ++k) sched += (k ? "," : "") + std::to_string(f.schedule[k]);
  std::string cmd = "collie explore " + shell_quote(file) + " --schedule " + (sched.empty() ? "0" : sched);
  if (f.buffering != Buffering::kConfigured) cmd += std::string(" --buffering ") + buffering_flag(f.buffering);
  for (const auto& fault : f.faults) cmd += " --fault " + shell_quote(fault);
  return cmd + " -v";
}

namespace {

[[noreturn]] void usage(const std::string& msg) { throw Error(ErrorKind::kUsage, OpContext{}, msg); }

// A replayed schedule must be the one the run took: a choice beyond the
// alternatives offered, or one where the run offered none, is refused.
void check_schedule(const std::vector<int>& want, const sim::Explorer& ex) {
  const std::vector<int>& took = ex.taken();
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (k < took.size() && want[k] == took[k]) continue;
    if (k >= took.size() && want[k] == 0) continue;  // trailing zeros: the default anyway
    if (k >= took.size())
      usage("--schedule: choice " + std::to_string(k + 1) + " is " + std::to_string(want[k]) + ", but the run makes " +
            std::to_string(took.size()) + " choice" + (took.size() == 1 ? "" : "s") + " (a schedule from another "
            "program, or another buffering?)");
    usage("--schedule: choice " + std::to_string(k + 1) + " is " + std::to_string(want[k]) + ", but there it has " +
          std::to_string(ex.widths()[k]) + " alternatives (0 to " + std::to_string(ex.widths()[k] - 1) + ")");
  }
}

}  // namespace

ExploreResult explore(const Scenario& s, const ExploreOptions& o) {
  if (o.max_runs == 0) usage("--max-runs must be at least 1");
  for (int c : o.schedule)
    if (c < 0) usage("--schedule: choices are numbers from 0, not " + std::to_string(c));
  ExploreResult res;
  std::set<std::string> seen;
  struct Mode {
    std::string name;
    Buffering buffering = Buffering::kConfigured;
    std::string fault;  // one fault of the set, or none
    std::vector<int> prefix;
    bool done = false;
  };
  auto buffering_name = [&](Buffering b) -> std::string {
    switch (b) {
      case Buffering::kConfigured:
        return "eager up to " + std::to_string(s.network.eager_threshold_bytes) + " bytes (as configured)";
      case Buffering::kRendezvous: return "every send rendezvous";
      case Buffering::kEager: return "every send eager";
    }
    return "";
  };
  std::vector<Mode> modes;
  const bool single = !o.schedule.empty();
  if (single) {
    std::string faults;
    for (const auto& f : o.base.fault_args) faults += (faults.empty() ? "" : ", ") + f;
    modes.push_back({buffering_name(o.buffering) + (faults.empty() ? "" : "; with " + faults), o.buffering, "", o.schedule});
  } else {
    for (Buffering b : {Buffering::kConfigured, Buffering::kRendezvous, Buffering::kEager})
      modes.push_back({buffering_name(b), b, "", {}});
    if (o.with_faults) {
      for (int a = 0; a < s.world; ++a) {
        modes.push_back({"crash rank " + std::to_string(a) + " at its first op", Buffering::kConfigured,
                         "crash:rank=" + std::to_string(a) + ",op=1", {}});
        for (int b = 0; b < s.world; ++b)
          if (a != b)
            modes.push_back({"drop the first message " + std::to_string(a) + "->" + std::to_string(b),
                             Buffering::kConfigured,
                             "drop:src=" + std::to_string(a) + ",dst=" + std::to_string(b) + ",nth=1", {}});
      }
    }
  }
  for (const Mode& m : modes) res.fault_placements_total += m.fault.empty() ? 0 : 1;

  // One run of mode m: the next schedule of its search.
  auto run_once = [&](Mode& m) {
    sim::Explorer ex(m.prefix);
    RunOptions ro = o.base;
    ro.explorer = &ex;
    if (m.buffering == Buffering::kRendezvous) ro.eager_threshold_bytes = 0;
    if (m.buffering == Buffering::kEager) ro.eager_threshold_bytes = std::numeric_limits<std::size_t>::max();
    if (!m.fault.empty()) {
      if (auto err = sim::parse_fault(m.fault, ro.extra_faults)) throw std::logic_error(*err);
      ro.fault_args.push_back(m.fault);
    }
    ScenarioResult r = run_scenario(s, ro);
    ++res.runs;
    ++(m.fault.empty() ? res.schedules : res.fault_placements);
    if (single) check_schedule(o.schedule, ex);
    // A bug whatever the scenario expects: an error, a deadlock, a wrong result.
    if (r.outcome != "ok" || data_failure(r)) {
      if (seen.insert(failure_signature(r)).second) {
        ExploreFinding f;
        f.signature = failure_signature(r);
        f.mode = m.name;
        f.buffering = m.buffering;
        f.faults = ro.fault_args;
        f.schedule = ex.taken();
        f.choices = ex.labels();
        f.result = std::move(r);
        res.findings.push_back(std::move(f));
      }
    }
    // Faults and replays: the default order (or the given one) only.
    m.done = single || !m.fault.empty() || !ex.next(m.prefix);
  };
  // Every mode's first run, then the searches in turn, within the bound.
  for (Mode& m : modes)
    if (res.runs < o.max_runs) run_once(m);
  for (bool any = true; any && res.runs < o.max_runs;) {
    any = false;
    for (Mode& m : modes) {
      if (m.done || res.runs >= o.max_runs) continue;
      any = true;
      run_once(m);
    }
  }
  res.exhausted = res.runs > 0 && std::all_of(modes.begin(), modes.end(), [](const Mode& m) { return m.done; });
  return res;
}

}  // namespace collie::scenario
