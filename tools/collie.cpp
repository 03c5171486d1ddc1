// The collie command.
//
//   collie run FILE...            run scenarios, check them, print what ranks print
//   collie validate FILE...       parse and check scenarios without running them
//   collie conformance --backend  the conformance suite, as a feature x result matrix
//   collie backends               the backends built in, and how each is selected
//
// Exit codes: 0 every expectation held; 1 a scenario or check failed;
// 2 invalid input (a malformed scenario) or usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/backend.h"
#include "conformance/suite.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/runner.h"

#ifndef COLLIE_SCENARIO_DIR
#define COLLIE_SCENARIO_DIR "scenarios"
#endif

namespace {

using collie::scenario::ScenarioResult;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// Progress on stderr, only on a terminal and never with -q.
struct Progress {
  bool on = false;
  void show(int i, int n, const std::string& what) const {
    if (!on) return;
    std::fprintf(stderr, "\r\033[K[%d/%d] %s", i + 1, n, what.c_str());
    std::fflush(stderr);
  }
  void clear() const {
    if (on) std::fprintf(stderr, "\r\033[K");
  }
};

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

void print_result(const ScenarioResult& r, int verbosity) {
  if (verbosity >= 0) {
    for (const auto& l : r.output) {
      if (verbosity > 0) std::cout << "[rank " << l.rank << " @ " << l.time << " ns] ";
      std::cout << l.text << "\n";
    }
  }
  std::ostringstream s;
  s << (r.passed ? "PASS " : "FAIL ") << r.file << " (" << r.name << "): " << r.outcome << "; world " << r.world
    << "; backend " << r.backend;
  if (r.simulated) s << "; virtual time " << r.virtual_time << " ns; trace " << hex(r.trace_hash);
  s << "; " << r.checks << " checks; seed " << r.seed;
  std::cout << s.str() << "\n";
  if (!r.passed) {
    bool replay_shown = false;
    for (const auto& f : r.failures) {
      replay_shown = replay_shown || f.find("\nreplay: ") != std::string::npos;
      std::istringstream lines(f);
      std::string l;
      while (std::getline(lines, l)) std::cout << "    " << l << "\n";
    }
    if (!replay_shown) std::cout << "    replay: " << r.replay << "\n";
  } else if (verbosity > 0 && r.outcome != "ok") {
    std::istringstream lines(r.detail);
    std::string l;
    std::cout << "    (expected)\n";
    while (std::getline(lines, l)) std::cout << "    " << l << "\n";
  }
}

nlohmann::json to_json(const ScenarioResult& r) {
  nlohmann::json j;
  j["file"] = r.file;
  j["name"] = r.name;
  j["passed"] = r.passed;
  j["outcome"] = r.outcome;
  j["detail"] = r.detail;
  j["failures"] = r.failures;
  j["backend"] = r.backend;
  j["seed"] = r.seed;
  j["world"] = r.world;
  j["checks"] = r.checks;
  j["wall_seconds"] = r.wall_seconds;
  j["replay"] = r.replay;
  if (r.simulated) {
    j["virtual_time_ns"] = r.virtual_time;
    j["trace_hash"] = hex(r.trace_hash);
    j["events"] = r.events;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : r.output) out.push_back({{"rank", l.rank}, {"time_ns", l.time}, {"text", l.text}});
  j["output"] = out;
  return j;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) {
    std::cerr << "collie: cannot write " << path << "\n";
    return false;
  }
  return true;
}

int load_plugins(const std::vector<std::string>& plugins) {
  for (const auto& p : plugins) {
    try {
      collie::BackendRegistry::builtin().load_plugin(p);
    } catch (const collie::Error& e) {
      std::cerr << "collie: " << e.detail() << "\n";
      return kExitInvalid;
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collie: run, check and debug collective communication"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "collie 0.1.0");

  // run
  auto* run = app.add_subcommand("run", "run scenario files and check every op against the reference oracle");
  std::vector<std::string> files;
  std::string backend;
  std::uint64_t seed = 0;
  int world = 0;
  bool json = false, quiet = false;
  int verbose = 0;
  std::string junit;
  std::vector<std::string> plugins;
  run->add_option("files", files, "scenario files (YAML)")->required()->check(CLI::ExistingFile);
  run->add_option("--backend", backend, "backend to run on (default: the scenario's, else sim)");
  auto* seed_opt = run->add_option("--seed", seed, "seed of every random choice (default: the scenario's)");
  auto* world_opt = run->add_option("--world", world, "override the world size")->check(CLI::Range(1, 1 << 20));
  run->add_flag("--json", json, "print results as JSON instead of text");
  run->add_option("--junit", junit, "write a JUnit XML report to this file");
  run->add_flag("-q,--quiet", quiet, "print only the summary lines");
  run->add_flag("-v,--verbose", verbose, "prefix output lines with rank and virtual time; show expected errors");
  run->add_option("--backend-plugin", plugins, "load a backend plugin (a shared library); repeatable");
  std::vector<std::string> fault_args;
  std::string trace_path, dot_path;
  double timeout_us = 0;
  std::uint64_t random_faults = 0;
  bool destructive = false;
  run->add_option("--fault", fault_args,
                  "inject a fault, e.g. drop:src=0,dst=1,nth=3  crash:rank=2,at_us=30  (docs/faults.md); repeatable");
  auto* random_opt = run->add_option("--random-faults", random_faults, "add the random fault profile of this seed");
  run->add_flag("--destructive", destructive, "with --random-faults: also drops, partitions and crashes");
  auto* timeout_opt = run->add_option("--timeout-us", timeout_us, "every op times out after this much virtual time");
  run->add_option("--trace", trace_path, "write a Chrome trace (Perfetto) of the run to this file");
  run->add_option("--report-dot", dot_path, "write the wait-for graph (Graphviz) here when the run deadlocks");

  // validate
  auto* validate = app.add_subcommand("validate", "parse and check scenario files without running them");
  std::vector<std::string> vfiles;
  int vworld = 0;
  validate->add_option("files", vfiles, "scenario files (YAML)")->required();
  auto* vworld_opt = validate->add_option("--world", vworld, "check against this world size instead");

  // conformance
  auto* conf = app.add_subcommand("conformance", "run the conformance suite on a backend");
  std::string cbackend = "sim", cjunit, filter;
  std::vector<std::string> cplugins, dirs;
  int cases = 20;
  std::uint64_t cseed = 1;
  bool cquiet = false;
  conf->add_option("--backend", cbackend, "backend under test")->required();
  conf->add_option("--junit", cjunit, "write a JUnit XML report to this file");
  conf->add_option("--filter", filter, "only cases whose feature/name matches this regular expression");
  conf->add_option("--backend-plugin", cplugins, "load a backend plugin (a shared library); repeatable");
  conf->add_option("--scenarios", dirs, "folders of scenarios (default: " COLLIE_SCENARIO_DIR ")");
  conf->add_option("--cases", cases, "generated property cases per feature")->check(CLI::Range(0, 100000));
  conf->add_option("--seed", cseed, "seed of the generated cases");
  conf->add_flag("-q,--quiet", cquiet, "no progress display");

  // backends
  auto* backends = app.add_subcommand("backends", "list the backends and how each is selected");
  std::vector<std::string> bplugins;
  backends->add_option("--backend-plugin", bplugins, "also load these plugins");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitInvalid;
  }

  if (*backends) {
    if (int rc = load_plugins(bplugins)) return rc;
    for (const auto* b : collie::BackendRegistry::builtin().list()) {
      std::cout << b->name << (b->simulated ? "  (simulated)" : "") << "\n    " << b->description
                << "\n    select: " << b->selection << "\n";
    }
    std::cout << "out of tree: --backend-plugin LIB.so adds a backend (see docs/backends.md)\n";
    return kExitOk;
  }

  if (*validate) {
    int rc = kExitOk;
    for (const auto& f : vfiles) {
      try {
        auto s = collie::scenario::load_file(f);
        if (*vworld_opt) {
          s.world = vworld;
          collie::scenario::check_world(s);
        }
        std::cout << "ok " << f << " (" << s.name << ")\n";
      } catch (const collie::scenario::ScenarioError& e) {
        std::cout << e.what() << "\n";
        rc = kExitInvalid;
      }
    }
    return rc;
  }

  if (*run) {
    if (int rc = load_plugins(plugins)) return rc;
    Progress progress;
    progress.on = !quiet && !json && isatty(STDERR_FILENO) && files.size() > 1;
    std::vector<collie::scenario::Scenario> scenarios;
    int rc = kExitOk;
    for (const auto& f : files) {
      try {
        scenarios.push_back(collie::scenario::load_file(f));
      } catch (const collie::scenario::ScenarioError& e) {
        std::cerr << e.what() << "\n";
        rc = kExitInvalid;
      }
    }
    if (rc != kExitOk) return rc;  // nothing runs half-way
    collie::scenario::RunOptions ro;
    ro.backend = backend;
    if (*seed_opt) ro.seed = seed;
    if (*world_opt) ro.world = world;
    for (const auto& f : fault_args) {
      if (auto err = collie::sim::parse_fault(f, ro.extra_faults)) {
        std::cerr << "collie: --fault: " << *err << "\n";
        return kExitInvalid;
      }
    }
    ro.fault_args = fault_args;
    if (*random_opt) ro.random_faults_seed = random_faults;
    ro.destructive_faults = destructive;
    if (*timeout_opt) ro.timeout_ns = static_cast<collie::Nanos>(timeout_us * 1000);
    if ((!trace_path.empty() || !dot_path.empty()) && scenarios.size() > 1) {
      std::cerr << "collie: --trace and --report-dot take one scenario\n";
      return kExitInvalid;
    }
    ro.trace_path = trace_path;
    ro.dot_path = dot_path;
    std::vector<ScenarioResult> results;
    nlohmann::json all = nlohmann::json::array();
    int failed = 0;
    for (std::size_t i = 0; i < scenarios.size(); ++i) {
      progress.show(static_cast<int>(i), static_cast<int>(scenarios.size()), scenarios[i].file);
      ScenarioResult r;
      try {
        r = collie::scenario::run_scenario(scenarios[i], ro);
      } catch (const collie::scenario::ScenarioError& e) {
        progress.clear();
        std::cerr << e.what() << "\n";
        return kExitInvalid;
      } catch (const collie::Error& e) {
        progress.clear();
        std::cerr << "collie: " << e.detail() << "\n";
        return kExitInvalid;
      }
      progress.clear();
      failed += r.passed ? 0 : 1;
      if (json) all.push_back(to_json(r));
      else print_result(r, quiet ? -1 : verbose);
      results.push_back(std::move(r));
    }
    if (json) std::cout << all.dump(2) << "\n";
    else if (results.size() > 1) std::cout << results.size() - static_cast<std::size_t>(failed) << " passed, " << failed << " failed\n";
    if (!junit.empty()) {
      std::vector<collie::conformance::CaseResult> junit_cases;
      for (const auto& r : results) {
        collie::conformance::CaseResult c;
        c.feature = r.feature.empty() ? "scenarios" : r.feature;
        c.name = r.file;
        c.kind = "scenario";
        c.passed = r.passed;
        for (const auto& f : r.failures) c.message += f + "\n";
        c.replay = r.replay;
        c.seconds = r.wall_seconds;
        junit_cases.push_back(std::move(c));
      }
      if (!write_file(junit, collie::conformance::junit_xml("collie run", junit_cases))) return kExitInvalid;
    }
    return failed ? kExitFailed : kExitOk;
  }

  if (*conf) {
    if (int rc = load_plugins(cplugins)) return rc;
    collie::conformance::SuiteOptions so;
    so.backend = cbackend;
    so.scenario_dirs = dirs.empty() ? std::vector<std::string>{COLLIE_SCENARIO_DIR} : dirs;
    so.filter = filter;
    so.cases_per_feature = cases;
    so.seed = cseed;
    Progress progress;
    progress.on = !cquiet && isatty(STDERR_FILENO);
    so.progress = [&](int i, int n, const std::string& what) { progress.show(i, n, what); };
    collie::conformance::SuiteResult r;
    try {
      r = collie::conformance::run_conformance(so);
    } catch (const collie::Error& e) {
      progress.clear();
      std::cerr << "collie: " << e.detail() << "\n";
      return kExitInvalid;
    }
    progress.clear();
    std::cout << collie::conformance::format_matrix(r);
    if (!cjunit.empty() &&
        !write_file(cjunit, collie::conformance::junit_xml("collie conformance " + cbackend, r.cases)))
      return kExitInvalid;
    return r.passed() ? kExitOk : kExitFailed;
  }
  return kExitInvalid;
}
