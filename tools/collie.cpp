// The collie command.
//
//   collie run FILE...            run scenarios, check them, print what ranks print
//   collie run [-n N] -- COMMAND  run an unmodified torch.distributed program (tools/run_script.h)
//   collie validate FILE...       parse and check scenarios without running them
//   collie conformance --backend  the conformance suite, as a feature x result matrix
//   collie backends               the backends built in, and how each is selected
//
// Exit codes: 0 every expectation held; 1 a scenario or check failed;
// 2 invalid input (a malformed scenario) or usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/data_path.h"
#include "backends/job.h"
#include "backends/registry.h"
#include "backends/torch/torch_backend.h"
#include "conformance/suite.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/program_checks.h"
#include "scenario/run_report.h"
#include "scenario/runner.h"
#include "scenario/search.h"
#include "sim/faults.h"
#include "tools/bench_command.h"
#include "tools/calibrate.h"
#include "tools/backend_flags.h"
#include "tools/launch.h"
#include "tools/result_json.h"
#include "tools/run_script.h"
#include "tools/worker_command.h"


namespace {

using collie::scenario::ScenarioResult;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// Progress on stderr, never with -q: on a terminal (`on`) one line
// rewritten in place; elsewhere, with `lines` (a CI log of a long run),
// whole lines -- when the part of `what` before its '/' changes (a
// conformance feature) and at least every kLineEvery between.
struct Progress {
  static constexpr std::chrono::seconds kLineEvery{10};
  bool on = false;
  bool lines = false;
  mutable std::string last_group;
  mutable std::chrono::steady_clock::time_point last_line{};
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  void show(int i, int n, const std::string& what) const {
    if (on) {
      std::fprintf(stderr, "\r\033[K[%d/%d] %s", i + 1, n, what.c_str());
      std::fflush(stderr);
      return;
    }
    if (!lines) return;
    const auto now = std::chrono::steady_clock::now();
    const std::string group = what.substr(0, what.find('/'));
    if (group == last_group && now - last_line < kLineEvery) return;
    last_group = group;
    last_line = now;
    const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
    std::fprintf(stderr, "[%d/%d] %s (%lld s)\n", i + 1, n, what.c_str(), static_cast<long long>(elapsed));
    std::fflush(stderr);
  }
  void clear() const {
    if (on) std::fprintf(stderr, "\r\033[K");
  }
};

void print_result(const ScenarioResult& r, int verbosity) {
  collie::scenario::ReportLayout layout;
  layout.title = r.file + " (" + r.name + ")";
  layout.verbosity = verbosity;
  collie::scenario::print_run_report(std::cout, r, layout);
}

nlohmann::json to_json(const ScenarioResult& r) {
  nlohmann::json j;
  j["file"] = r.file;
  j["name"] = r.name;
  j["skipped"] = r.skipped;
  if (r.skipped) j["skip_reason"] = r.skip_reason;
  if (!r.fault_report.empty()) j["fault_report"] = r.fault_report;
  collie::tools::add_run_fields(j, r);
  if (r.simulated) {
    j["events_per_second"] = static_cast<double>(r.events) / std::max(r.wall_seconds, 1e-9);
    j["timing_only"] = r.timing_only;
  }
  collie::tools::add_output(j, r);
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

// Flag values, checked as written: "--seed -1" is not 2^64 - 1, and
// "--timeout-us 0" is not "no timeout".
const CLI::Validator kWholeNumber(
    [](std::string& v) -> std::string {
      return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 20
                 ? std::string()
                 : "'" + v + "' is not a whole number >= 0";
    },
    "WHOLE NUMBER");
const CLI::Validator kPositiveNumber(
    [](std::string& v) -> std::string {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return end != v.c_str() && *end == '\0' && x > 0 && std::isfinite(x) ? std::string()
                                                                           : "'" + v + "' is not a number > 0";
    },
    "NUMBER > 0");

// Whether `path` can be written (an output file given on the command line),
// checked before anything runs; prints why not.
bool writable(const char* flag, const std::string& path) {
  if (path.empty()) return true;
  std::ofstream f(path, std::ios::binary | std::ios::app);
  if (f) return true;
  std::cerr << "collie: " << flag << " " << path << ": cannot write it (" << std::strerror(errno) << ")\n";
  return false;
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

// Runs f(): bad input it finds on the way (a ScenarioError at the file, a
// collie::Error of usage) is printed on stderr, after clearing the
// progress line, and makes it false.
template <typename F>
bool accepted(const Progress& progress, F&& f) {
  try {
    f();
    return true;
  } catch (const collie::scenario::ScenarioError& e) {
    progress.clear();
    std::cerr << e.what() << "\n";
  } catch (const collie::Error& e) {
    progress.clear();
    std::cerr << "collie: " << e.detail() << "\n";
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // `collie run [FLAGS] -- COMMAND...`: a torch.distributed program, not scenario files.
  if (collie::tools::is_script_run(argc, argv)) return collie::tools::run_script_command(argc, argv);

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
  collie::tools::BackendFlags flags;
  run->add_option("files", files, "scenario files (YAML)")->required();
  run->add_option("--backend", backend, "backend to run on (default: the scenario's, else sim)");
  auto* seed_opt = run->add_option("--seed", seed, "seed of every random choice (default: the scenario's)")
                       ->check(kWholeNumber);
  auto* world_opt = run->add_option("--world", world, "override the world size")->check(CLI::Range(1, 1 << 20));
  run->add_flag("--json", json, "print results as JSON instead of text");
  run->add_option("--junit", junit, "write a JUnit XML report to this file");
  run->add_flag("-q,--quiet", quiet, "print only the summary lines");
  run->add_flag("-v,--verbose", verbose, "prefix output lines with rank and virtual time; show expected errors");
  flags.add_to(*run);
  std::vector<std::string> fault_args;
  std::string trace_path, dot_path;
  double timeout_us = 0;
  std::uint64_t random_faults = 0;
  bool destructive = false;
  run->add_option("--fault", fault_args,
                  "inject a fault, e.g. drop:src=0,dst=1,nth=3  crash:rank=2,at_us=30  (docs/faults.md); repeatable");
  auto* random_opt = run->add_option("--random-faults", random_faults, "add the random fault profile of this seed")
                         ->check(kWholeNumber);
  run->add_flag("--destructive", destructive, "with --random-faults: also drops, partitions and crashes");
  auto* timeout_opt = run->add_option("--timeout-us", timeout_us,
                                      "every op's timeout (virtual time on the simulator); on real backends a run "
                                      "that makes no progress this long is a hang (default 60 s)")
                          ->check(kPositiveNumber);
  bool strict = false;
  run->add_flag("--strict", strict,
                "a library's differences where torch leaves the behaviour unspecified fail the run (they are notes "
                "otherwise; collie's own core is always held to them)");
  run->add_option("--trace", trace_path, "write a Chrome trace (Perfetto) of the run to this file");
  run->add_option("--report-dot", dot_path, "write the wait-for graph (Graphviz) here when the run deadlocks");
  bool in_process = false;
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

  // validate
  auto* validate = app.add_subcommand("validate", "parse and check scenario files without running them");
  std::vector<std::string> vfiles;
  int vworld = 0;
  validate->add_option("files", vfiles, "scenario files (YAML)")->required();
  auto* vworld_opt = validate->add_option("--world", vworld, "check against this world size instead")
                         ->check(CLI::Range(1, 1 << 20));

  // conformance
  auto* conf = app.add_subcommand("conformance", "run the conformance suite on a backend");
  std::string cbackend = "sim", cjunit, filter;
  std::vector<std::string> dirs;
  collie::tools::BackendFlags cflags;
  int cases = 20;
  std::uint64_t cseed = 1;
  bool cquiet = false;
  conf->add_option("--backend", cbackend, "backend under test")->required();
  conf->add_option("--junit", cjunit, "write a JUnit XML report to this file");
  conf->add_option("--filter", filter, "only cases whose feature/name matches this regular expression");
  cflags.add_to(*conf);
  conf->add_option("--scenarios", dirs,
                   "folders of scenarios (default: the scenarios collie ships, found beside it: "
                   "$COLLIE_DATA_DIR, PREFIX/share/collie, or its source tree)");
  conf->add_option("--cases", cases,
                   "generated property cases per feature (past 20 they go deeper: worlds up to 32, MiB counts)")
      ->check(CLI::Range(0, 100000));
  double budget_s = 0, case_timeout_s = 120;
  conf->add_option("--case-timeout", case_timeout_s,
                   "wall-clock seconds one case may take on an in-process backend before the suite gives up on it "
                   "(a transport that never returns control; default 120)")
      ->check(CLI::Range(0.001, 1e7));
  conf->add_option("--budget", budget_s,
                   "then keep generating deeper cases until this many seconds have passed")
      ->check(CLI::Range(0.0, 1e7));
  conf->add_option("--seed", cseed, "seed of the generated cases")->check(kWholeNumber);
  conf->add_flag("-q,--quiet", cquiet, "no progress display");
  bool cprocesses = false, cstrict = false;
  double ctimeout_us = 0;
  int clanes = 0;
  conf->add_option("--lanes", clanes,
                   "process backends: run cases side by side on this many jobs, those expected to hang or fail "
                   "apart from the rest (default 4; 1: one after another)")
      ->check(CLI::Range(1, 64));
  conf->add_flag("--processes", cprocesses, "with --backend tcp: one process per rank instead of every rank in this process");
  conf->add_flag("--strict", cstrict, "a library's differences where torch is silent fail the suite (notes otherwise)");
  conf->add_option("--timeout-us", ctimeout_us,
                   "process backends: a case that makes no progress this long hangs (default 20 s)")
      ->check(kPositiveNumber);

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
  auto* ftimeout_opt = fuzz->add_option("--timeout-us", ftimeout_us, "every op times out after this much virtual time")
                           ->check(kPositiveNumber);
  fuzz->add_flag("-q,--quiet", fquiet, "no progress display");

  // explore
  auto* exp = app.add_subcommand("explore", "systematically explore a scenario's delivery orders and buffering");
  std::string efile, eschedule, ebuffering;
  std::size_t emax = 2000;
  bool efaults = false;
  int everbose = 0;
  exp->add_option("file", efile, "scenario file")->required()->check(CLI::ExistingFile);
  std::vector<std::string> efault_args;
  exp->add_option("--max-runs", emax, "bound on the number of runs (default 2000)")->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40));
  exp->add_flag("--faults", efaults, "also try each single fault: a channel's first message dropped, a rank crashed");
  auto* eschedule_opt = exp->add_option("--schedule", eschedule, "replay one schedule (comma-separated choices, as reported)");
  exp->add_option("--buffering", ebuffering, "with --schedule: configured, rendezvous or eager")
      ->check(CLI::IsMember({"configured", "rendezvous", "eager"}))
      ->needs(eschedule_opt);
  exp->add_option("--fault", efault_args, "add this fault to every run, as collie run --fault does (docs/faults.md); repeatable")
      ->allow_extra_args(false);
  exp->add_flag("-v,--verbose", everbose, "show each finding's full diagnosis");

  // launch
  auto* launch = app.add_subcommand("launch", "start N local processes of a program as one job (env:// rendezvous)");
  collie::tools::LaunchOptions lo;
  launch->add_option("-n,--nproc", lo.nprocs, "number of ranks")->required()->check(CLI::Range(1, 4096));
  launch->add_option("--master-port", lo.master_port, "rank 0's rendezvous port, 1 to 65535 (default: a free one)")
      ->check(CLI::Range(1, 65535));
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

  // worker (internal): one rank of a process job
  auto* worker = app.add_subcommand("worker", "internal: serve one rank's ops to a collie controller")->group("");
  std::string wbackend = "tcp";
  worker->add_option("--backend", wbackend, "the backend this worker runs the ops with")->check(CLI::IsMember({"tcp"}));

  // backends
  auto* backends = app.add_subcommand("backends", "list the backends and how each is selected");
  collie::tools::BackendFlags bflags;
  bflags.add_to(*backends);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitInvalid;
  }

  if (*worker) return collie::tools::run_tcp_worker();
  if (*bench) return collie::tools::run_bench_command(bc);
  if (*calibrate) return collie::tools::run_calibrate_command(cc);

  if (*launch) {
    lo.prefix = !no_prefix;
    lo.bind_to_core = bind_to == "core";
    return collie::tools::launch(lo);
  }

  if (*backends) {
    if (int rc = bflags.apply()) return rc;
    const auto& reg = collie::BackendRegistry::builtin();
    for (const auto* b : reg.list()) {
      std::cout << b->name << (b->simulated ? "  (simulated)" : "") << "\n    " << b->description
                << "\n    select: " << b->selection << "\n";
      if (b->unavailable)
        if (auto why = b->unavailable()) std::cout << "    not available here: " << *why << "\n";
    }
    for (const auto& f : reg.families()) {
      std::cout << f.prefix << ":NAME\n    " << f.description << "\n    select: " << f.selection << "\n";
      if (f.prefix == "torch") std::cout << "    here: " << collie::torch::probe() << "\n";
    }
    std::cout << "out of tree: --backend-plugin LIB.so adds a transport (see docs/backends.md)\n";
    return kExitOk;
  }

  if (*validate) {
    int rc = kExitOk;
    for (const auto& f : vfiles) {
      try {
        collie::scenario::LoadOverrides vo;
        if (*vworld_opt) vo.world = vworld;
        auto s = collie::scenario::load_file(f, vo);
        // What run would refuse before its first op -- unless its memory
        // guard refuses the run first (then run evaluates nothing either).
        if (!collie::over_memory_guard(collie::scenario::memory_needed(s))) collie::scenario::check_values(s);
        std::cout << "ok " << f << " (" << s.name << ")\n";
      } catch (const collie::scenario::ScenarioError& e) {
        std::cout << e.what() << "\n";
        rc = kExitInvalid;
      }
    }
    return rc;
  }

  if (*run) {
    if (int rc = flags.apply()) return rc;
    Progress progress;
    progress.on = !quiet && !json && isatty(STDERR_FILENO) && files.size() > 1;
    std::vector<collie::scenario::Scenario> scenarios;
    int rc = kExitOk;
    collie::scenario::LoadOverrides overrides;
    if (*world_opt) overrides.world = world;
    for (const auto& f : files) {
      try {
        scenarios.push_back(collie::scenario::load_file(f, overrides));
      } catch (const collie::scenario::ScenarioError& e) {
        std::cerr << e.what() << "\n";
        rc = kExitInvalid;
      }
    }
    if (rc != kExitOk) return rc;  // nothing runs half-way
    collie::scenario::RunOptions ro;
    ro.backend = backend;
    if (*seed_opt) ro.seed = seed;
    ro.timing_only = timing_only;
    ro.strict = strict;
    ro.replay_flags = flags.replay();
    if (!profile_path.empty()) {
      try {
        ro.network = collie::scenario::load_profile(profile_path);
        ro.profile_path = profile_path;
      } catch (const collie::scenario::ScenarioError& e) {
        std::cerr << e.what() << "\n";
        return kExitInvalid;
      }
    }
    // Which faults a backend can inject: the simulator's, or its processes'.
    const std::string backend_name = backend.empty() ? scenarios.front().backend : backend;
    const collie::BackendInfo* info = collie::BackendRegistry::builtin().find(backend_name);
    if (!info) {
      try {
        collie::BackendRegistry::builtin().require(backend_name);
      } catch (const collie::Error& e) {
        std::cerr << "collie: " << e.detail() << "\n";
        return kExitInvalid;
      }
    }
    ro.processes = info->start && (!info->create || !in_process);
    if (in_process && !info->create) {
      std::cerr << "collie: --in-process: backend '" << backend_name << "' runs only as processes\n";
      return kExitInvalid;
    }
    for (const auto& f : fault_args) {
      std::optional<std::string> err;
      if (info->simulated_faults) {
        err = collie::sim::parse_fault(f, ro.extra_faults);
      } else if (ro.processes) {
        collie::ProcessFault pf;
        err = collie::parse_process_fault(f, pf);
        if (!err) ro.process_faults.push_back(pf);
      } else {
        err = "backend '" + backend_name + "' cannot inject faults in this form (the simulator's faults need --backend "
              "sim; crash/stall faults need ranks that are processes)";
      }
      if (err) {
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
    if (!writable("--trace", trace_path) || !writable("--report-dot", dot_path) || !writable("--junit", junit))
      return kExitInvalid;
    ro.trace_path = trace_path;
    ro.dot_path = dot_path;
    if (random_faults && !info->simulated_faults) {
      std::cerr << "collie: --random-faults needs the simulator's faults (--backend sim)\n";
      return kExitInvalid;
    }
    std::vector<ScenarioResult> results;
    nlohmann::json all = nlohmann::json::array();
    int failed = 0, skipped = 0;
    for (std::size_t i = 0; i < scenarios.size(); ++i) {
      progress.show(static_cast<int>(i), static_cast<int>(scenarios.size()), scenarios[i].file);
      ScenarioResult r;
      if (!accepted(progress, [&] { r = collie::scenario::run_scenario(scenarios[i], ro); })) return kExitInvalid;
      progress.clear();
      failed += r.passed || r.skipped ? 0 : 1;
      skipped += r.skipped ? 1 : 0;
      if (json) all.push_back(to_json(r));
      else print_result(r, quiet ? -1 : verbose);
      results.push_back(std::move(r));
    }
    // Names and printed text are the file's bytes: JSON gets U+FFFD for what is not UTF-8.
    if (json) std::cout << all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else if (results.size() > 1)
      std::cout << results.size() - static_cast<std::size_t>(failed + skipped) << " passed, " << failed << " failed"
                << (skipped ? ", " + std::to_string(skipped) + " skipped" : "") << "\n";
    if (!junit.empty()) {
      std::vector<collie::conformance::CaseResult> junit_cases;
      for (const auto& r : results) {
        collie::conformance::CaseResult c;
        c.feature = r.feature.empty() ? "scenarios" : r.feature;
        c.name = r.file;
        c.kind = "scenario";
        c.passed = r.passed;
        c.skipped = r.skipped;
        c.skip_reason = r.skip_reason;
        c.notes = r.notes;
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
    // Whole numbers exactly: stoull reads "1e9" as 1 and "-1" as 2^64 - 1.
    auto seed_of = [](const std::string& t) -> std::optional<std::uint64_t> {
      if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      return std::stoull(t);
    };
    const auto first = seed_of(fseeds.substr(0, dots));
    const auto last = dots == std::string::npos ? first : seed_of(fseeds.substr(dots + 2));
    if (!first || !last) {
      std::cerr << "collie: --seeds takes A..B (whole numbers), not '" << fseeds << "'\n";
      return kExitInvalid;
    }
    fo.first_seed = *first;
    fo.last_seed = *last;
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
    collie::scenario::FuzzResult r;
    if (!accepted(progress, [&] { r = collie::scenario::fuzz(s, fo); })) return kExitInvalid;
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
    for (const auto& f : efault_args) {
      if (auto err = collie::sim::parse_fault(f, eo.base.extra_faults)) {
        std::cerr << "collie: --fault: " << *err << "\n";
        return kExitInvalid;
      }
    }
    eo.base.fault_args = efault_args;
    if (*eschedule_opt) {
      std::stringstream ss(eschedule);
      std::string c;
      while (std::getline(ss, c, ',')) {
        if (c.empty() || c.size() > 9 || c.find_first_not_of("0123456789") != std::string::npos) {
          std::cerr << "collie: --schedule takes comma-separated choices (numbers from 0), not '" << eschedule << "'\n";
          return kExitInvalid;
        }
        eo.schedule.push_back(std::stoi(c));
      }
      if (eo.schedule.empty()) eo.schedule.push_back(0);
      if (ebuffering == "rendezvous") eo.buffering = collie::scenario::Buffering::kRendezvous;
      else if (ebuffering == "eager") eo.buffering = collie::scenario::Buffering::kEager;
    }
    collie::scenario::ExploreResult r;
    if (!accepted(Progress{}, [&] { r = collie::scenario::explore(s, eo); })) return kExitInvalid;
    // What was covered, in numbers; a search that stopped at the bound
    // says so, and what it found is then only what it found.
    std::cout << "explore " << efile << ": ";
    if (!eo.schedule.empty()) {
      std::cout << "one schedule replayed ("
                << (eo.buffering == collie::scenario::Buffering::kConfigured ? "buffering as configured"
                                                                            : "every send " + ebuffering)
                << (efault_args.empty() ? "" : ", with the --fault given") << ")\n";
    } else {
      std::cout << r.schedules << " schedule" << (r.schedules == 1 ? "" : "s") << " under 3 buffering modes";
      if (efaults) std::cout << ", " << r.fault_placements << " of " << r.fault_placements_total << " fault placements";
      std::cout << "; " << (r.exhausted ? "the space was exhausted" : "not exhaustive: stopped at the bound (--max-runs " + std::to_string(emax) + ")") << "\n";
    }
    std::cout << (r.findings.empty() ? std::string(eo.schedule.empty() && !r.exhausted
                                                       ? "no deadlock or failure found in what was covered\n"
                                                       : "no deadlock or failure found\n")
                                     : std::to_string(r.findings.size()) + " distinct failure" +
                                           (r.findings.size() == 1 ? "" : "s") + ":\n");
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < r.findings.size() && i < kShown; ++i) {
      const auto& f = r.findings[i];
      std::cout << "  [" << i + 1 << "] " << f.signature << "\n      under: " << f.mode << "\n";
      for (std::size_t k = 0; k < f.choices.size(); ++k)
        if (f.schedule[k] != 0) std::cout << "      choice " << k + 1 << ": " << f.choices[k] << "\n";
      std::cout << "      replay: " << collie::scenario::explore_replay(efile, f) << "\n";
      if (everbose) {
        std::istringstream lines(f.result.detail);
        std::string l;
        int n = 0;
        while (std::getline(lines, l) && n++ < 200) std::cout << "      | " << l << "\n";
        if (n > 200) std::cout << "      | ... (cut at 200 lines)\n";
      }
    }
    if (r.findings.size() > kShown) std::cout << "  ... and " << r.findings.size() - kShown << " more\n";
    return r.findings.empty() ? kExitOk : kExitFailed;
  }

  if (*conf) {
    if (int rc = cflags.apply()) return rc;
    if (!writable("--junit", cjunit)) return kExitInvalid;
    collie::conformance::SuiteOptions so;
    so.backend = cbackend;
    so.processes = cprocesses;
    so.lanes = clanes;
    so.strict = cstrict;
    so.timeout_ns = ctimeout_us > 0 ? static_cast<collie::Nanos>(ctimeout_us * 1000) : 20'000'000'000;
    so.replay_flags = cflags.replay();
    if (dirs.empty()) {
      const std::string shipped = collie::collie_data_path("scenarios");
      if (shipped.empty()) {
        std::cerr << "collie: cannot find the scenarios collie ships (looked in $COLLIE_DATA_DIR, "
                     "PREFIX/share/collie beside this binary and its source tree); give --scenarios DIR\n";
        return kExitInvalid;
      }
      dirs.push_back(shipped);
    }
    so.scenario_dirs = dirs;
    so.filter = filter;
    so.cases_per_feature = cases;
    so.budget_seconds = budget_s;
    so.case_timeout_seconds = case_timeout_s;
    so.seed = cseed;
    Progress progress;
    progress.on = !cquiet && isatty(STDERR_FILENO);
    progress.lines = !cquiet && !progress.on;  // a CI log shows life during a long suite
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
    if (r.abandoned) {
      // A case's thread is still inside the transport: end without
      // unwinding what it uses.
      std::cout.flush();
      std::quick_exit(kExitFailed);
    }
    return r.passed() ? kExitOk : kExitFailed;
  }
  return kExitInvalid;
}
