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
#include <iomanip>
#include <limits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/backend.h"
#include "conformance/suite.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/runner.h"
#include "scenario/search.h"
#include "sim/faults.h"
#include "tools/bench_command.h"
#include "tools/calibrate.h"
#include "tools/launch.h"

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
  if (r.timing_only) {
    s << "; timing only";
    if (r.skipped_steps) s << " (" << r.skipped_steps << " print/expect/update steps skipped)";
  } else {
    s << "; " << r.checks << " checks";
  }
  s << "; seed " << r.seed;
  if (r.simulated && r.events) {
    // The simulator's speed: events per second of wall time.
    std::ostringstream rate;
    rate.precision(2);
    rate << std::fixed << static_cast<double>(r.events) / std::max(r.wall_seconds, 1e-9) / 1e6;
    s << "; " << r.events << " events in " << std::fixed << std::setprecision(2) << r.wall_seconds << " s ("
      << rate.str() << " M events/s)";
  }
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
    j["events_per_second"] = static_cast<double>(r.events) / std::max(r.wall_seconds, 1e-9);
    j["timing_only"] = r.timing_only;
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

// Loads a scenario, or prints its file:line:column error and returns false.
bool load_or_report(const std::string& file, collie::scenario::Scenario& out) {
  try {
    out = collie::scenario::load_file(file);
    return true;
  } catch (const collie::scenario::ScenarioError& e) {
    std::cerr << e.what() << "\n";
    return false;
  }
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
  bool in_process = false;
  std::string rank_report;
  run->add_flag("--in-process", in_process,
                "with --backend tcp: every rank in this process over real sockets, instead of one process per rank");
  std::string profile_path;
  run->add_option("--profile", profile_path,
                  "simulate on this network profile (written by collie calibrate) instead of the scenario's network")
      ->check(CLI::ExistingFile);
  bool timing_only = false;
  run->add_flag("--timing-only", timing_only,
                "simulate costs only: tensors get no memory; print/expect/update steps and result checks are skipped "
                "(for worlds of thousands of ranks and large messages)");
  run->add_option("--rank-report", rank_report, "internal: run as one rank process and report to this folder")->group("");

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

  // fuzz
  auto* fuzz = app.add_subcommand("fuzz", "run a scenario over many seeds with random fault profiles");
  std::string ffile, fseeds = "1..100", fout;
  bool fdestructive = false, fshrink = false, fquiet = false;
  double ftimeout_us = 0;
  fuzz->add_option("file", ffile, "scenario file")->required()->check(CLI::ExistingFile);
  fuzz->add_option("--seeds", fseeds, "seed range A..B (default 1..100)");
  fuzz->add_flag("--destructive", fdestructive, "profiles may also drop, partition and crash");
  fuzz->add_flag("--shrink", fshrink, "reduce the first failure to a minimal scenario and write it out");
  fuzz->add_option("--out", fout, "where --shrink writes (default: FILE.shrunk.yaml)");
  auto* ftimeout_opt = fuzz->add_option("--timeout-us", ftimeout_us, "every op times out after this much virtual time");
  fuzz->add_flag("-q,--quiet", fquiet, "no progress display");

  // explore
  auto* exp = app.add_subcommand("explore", "systematically explore a scenario's delivery orders and buffering");
  std::string efile, eschedule, ebuffering;
  std::size_t emax = 2000;
  bool efaults = false;
  int everbose = 0;
  exp->add_option("file", efile, "scenario file")->required()->check(CLI::ExistingFile);
  exp->add_option("--max-runs", emax, "bound on the number of runs (default 2000)");
  exp->add_flag("--faults", efaults, "also try each single fault: a channel's first message dropped, a rank crashed");
  exp->add_option("--schedule", eschedule, "replay one schedule (comma-separated choices, as reported)");
  exp->add_option("--buffering", ebuffering, "with --schedule: configured, rendezvous or eager");
  exp->add_flag("-v,--verbose", everbose, "show each finding's full diagnosis");

  // launch
  auto* launch = app.add_subcommand("launch", "start N local processes of a program as one job (env:// rendezvous)");
  collie::tools::LaunchOptions lo;
  launch->add_option("-n,--nproc", lo.nprocs, "number of ranks")->required()->check(CLI::Range(1, 4096));
  launch->add_option("--master-port", lo.master_port, "rank 0's rendezvous port (default: a free one)");
  bool no_prefix = false;
  launch->add_flag("--no-prefix", no_prefix, "do not prefix output lines with the rank");
  std::string bind_to = "none";
  launch->add_option("--bind-to", bind_to,
                     "core: pin rank r to the r-th usable CPU when there are enough; none: do not pin (default)")
      ->check(CLI::IsMember({"core", "none"}));
  launch->add_option("command", lo.command, "the program and its arguments (after --)")->required();

  // bench
  collie::tools::BenchCommand bc;
  auto* bench = collie::tools::add_bench_command(app, bc);
  collie::tools::CalibrateCommand cc;
  auto* calibrate = collie::tools::add_calibrate_command(app, cc);

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

  if (*bench) return collie::tools::run_bench_command(bc, argc, argv);
  if (*calibrate) return collie::tools::run_calibrate_command(cc);

  if (*launch) {
    lo.prefix = !no_prefix;
    lo.bind_to_core = bind_to == "core";
    return collie::tools::launch(lo);
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
        if (*vworld_opt) collie::scenario::set_world(s, vworld);
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
    ro.timing_only = timing_only;
    if (!profile_path.empty()) {
      try {
        ro.network = collie::scenario::load_profile(profile_path);
        ro.profile_path = profile_path;
      } catch (const collie::scenario::ScenarioError& e) {
        std::cerr << e.what() << "\n";
        return kExitInvalid;
      }
    }
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
    if (!rank_report.empty()) {
      if (scenarios.size() != 1) return kExitInvalid;
      return collie::scenario::run_scenario_rank(scenarios[0], ro, rank_report);
    }
    if (ro.backend == "tcp" && !in_process) {
      ro.launch_ranks = [](const std::vector<std::string>& args, int n) {
        collie::tools::LaunchOptions job;
        job.nprocs = n;
        job.command.push_back(collie::tools::self_executable());
        job.command.insert(job.command.end(), args.begin(), args.end());
        return collie::tools::launch(job);
      };
    }
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

  if (*fuzz) {
    collie::scenario::Scenario s;
    if (!load_or_report(ffile, s)) return kExitInvalid;
    collie::scenario::FuzzOptions fo;
    const auto dots = fseeds.find("..");
    try {
      fo.first_seed = std::stoull(fseeds.substr(0, dots));
      fo.last_seed = dots == std::string::npos ? fo.first_seed : std::stoull(fseeds.substr(dots + 2));
    } catch (const std::exception&) {
      std::cerr << "collie: --seeds takes A..B, not '" << fseeds << "'\n";
      return kExitInvalid;
    }
    if (fo.last_seed < fo.first_seed) {
      std::cerr << "collie: --seeds " << fseeds << " is empty\n";
      return kExitInvalid;
    }
    fo.destructive = fdestructive;
    if (*ftimeout_opt) fo.base.timeout_ns = static_cast<collie::Nanos>(ftimeout_us * 1000);
    Progress progress;
    progress.on = !fquiet && isatty(STDERR_FILENO);
    fo.progress = [&](std::uint64_t at, std::size_t done, std::size_t total) {
      progress.show(static_cast<int>(done), static_cast<int>(total), "seed " + std::to_string(at));
    };
    const auto r = collie::scenario::fuzz(s, fo);
    progress.clear();
    std::cout << "fuzz " << ffile << ": " << r.runs << " seeds (" << fseeds << ", "
              << (fdestructive ? "destructive" : "benign") << " fault profiles), " << r.failures.size() << " failed\n";
    for (std::size_t i = 0; i < r.failures.size() && i < 20; ++i) {
      const auto& f = r.failures[i];
      std::cout << "  seed " << f.seed << ": " << collie::scenario::failure_signature(f.result) << "\n    "
                << (f.result.failures.empty() ? f.result.detail : f.result.failures[0].substr(0, f.result.failures[0].find('\n')))
                << "\n    replay: " << f.result.replay << "\n";
    }
    if (r.failures.size() > 20) std::cout << "  ... and " << r.failures.size() - 20 << " more\n";
    if (fshrink && !r.failures.empty()) {
      std::string summary;
      const std::string out = fout.empty() ? ffile.substr(0, ffile.rfind(".yaml")) + ".shrunk.yaml" : fout;
      const std::string yaml =
          collie::scenario::shrink(ffile, r.failures.front().seed, fdestructive, fo.base, &summary);
      if (!write_file(out, yaml)) return kExitInvalid;
      std::cout << "shrunk seed " << r.failures.front().seed << ":\n";
      std::istringstream lines(summary);
      std::string l;
      while (std::getline(lines, l)) std::cout << "  " << l << "\n";
      std::cout << "wrote " << out << "; replay: collie run " << out << "\n";
    }
    return r.failures.empty() ? kExitOk : kExitFailed;
  }

  if (*exp) {
    collie::scenario::Scenario s;
    if (!load_or_report(efile, s)) return kExitInvalid;
    collie::scenario::ExploreOptions eo;
    eo.max_runs = emax;
    eo.with_faults = efaults;
    if (!eschedule.empty()) {
      std::stringstream ss(eschedule);
      std::string c;
      while (std::getline(ss, c, ',')) {
        try {
          eo.schedule.push_back(std::stoi(c));
        } catch (const std::exception&) {
          std::cerr << "collie: --schedule takes comma-separated choices, not '" << eschedule << "'\n";
          return kExitInvalid;
        }
      }
      if (ebuffering == "rendezvous") eo.base.eager_threshold_bytes = 0;
      else if (ebuffering == "eager") eo.base.eager_threshold_bytes = std::numeric_limits<std::size_t>::max();
      else if (!ebuffering.empty() && ebuffering != "configured") {
        std::cerr << "collie: --buffering is configured, rendezvous or eager\n";
        return kExitInvalid;
      }
    }
    const auto r = collie::scenario::explore(s, eo);
    std::cout << "explore " << efile << ": " << r.runs << " run" << (r.runs == 1 ? "" : "s") << "; "
              << (eo.schedule.empty() ? (r.exhausted ? "the space was exhausted (every delivery order, 3 buffering modes"
                                                          + std::string(efaults ? ", single faults" : "") + ")"
                                                    : "stopped at the bound (--max-runs " + std::to_string(emax) +
                                                          "): the space was not exhausted")
                                      : std::string("one schedule replayed"))
              << "\n";
    std::cout << (r.findings.empty() ? "no deadlock or failure found\n"
                                     : std::to_string(r.findings.size()) + " distinct failure" +
                                           (r.findings.size() == 1 ? "" : "s") + ":\n");
    for (std::size_t i = 0; i < r.findings.size(); ++i) {
      const auto& f = r.findings[i];
      std::cout << "  [" << i + 1 << "] " << f.signature << "\n      under: " << f.mode << "\n";
      std::string sched;
      for (std::size_t k = 0; k < f.schedule.size(); ++k) sched += (k ? "," : "") + std::to_string(f.schedule[k]);
      for (std::size_t k = 0; k < f.choices.size(); ++k)
        if (f.schedule[k] != 0) std::cout << "      choice " << k + 1 << ": " << f.choices[k] << "\n";
      const char* buffering = f.mode.rfind("every send rendezvous", 0) == 0 ? " --buffering rendezvous"
                              : f.mode.rfind("every send eager", 0) == 0   ? " --buffering eager"
                                                                            : "";
      std::cout << "      replay: collie explore " << efile << " --schedule " << (sched.empty() ? "0" : sched)
                << buffering << " -v\n";
      if (everbose) {
        std::istringstream lines(f.result.detail);
        std::string l;
        while (std::getline(lines, l)) std::cout << "      | " << l << "\n";
      }
    }
    return r.findings.empty() ? kExitOk : kExitFailed;
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
