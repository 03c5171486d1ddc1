// The conformance suite: what `collie conformance --backend NAME` runs.
//
// Two kinds of cases, both run on the backend under test:
//   - every scenario marked `conformance: true` under the scenario folders,
//     filed under its `feature`;
//   - generated property cases: for each collective, random worlds, groups,
//     dtypes, reduce ops, counts, roots and algorithms checked against the
//     oracle; random point-to-point traffic; every dtype x reduce op; long
//     runs (many ops and thousands of frames in one world).
// Every run is a checking run: completed sends' buffers are scribbled
// (core/send_scribble.h).
// Case names are stable for a given seed, so --filter and JUnit history work.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/registry.h"

namespace collie::conformance {

struct SuiteOptions {
  std::string backend = "sim";
  const BackendRegistry* registry = nullptr;  // null: BackendRegistry::builtin()
  // Run the backend's ranks as processes (tcp has both forms; process-only
  // backends always do). A process job is started once per world size and
  // runs every case of that size, unless a case leaves it broken.
  bool processes = false;
  // Process backends: cases run side by side on this many jobs, those
  // expected to break theirs apart from the rest (lanes.h); 0: a default.
  int lanes = 0;
  bool strict = false;                        // differences where torch is silent fail too
  Nanos timeout_ns = 0;                       // process backends: a case that stops making progress this long hangs
  // Process backends: the op timeout of scenarios that expect a deadlock or
  // an error, or whose behaviour torch leaves unspecified (their programs
  // are a few small ops), and set none themselves, so that a library that
  // hangs costs this, not timeout_ns.
  Nanos hang_window_ns = 2'000'000'000;
  std::vector<std::string> replay_flags;      // appended to every replay command (--backend-plugin PATH, ...)
  std::vector<std::string> scenario_dirs;     // searched recursively for *.yaml
  std::string filter;                         // ECMAScript regex on "feature/name"; empty: all
  // Generated property cases per feature; past the first 20 they go
  // deeper (worlds up to 32, counts below the world size and up to MiBs).
  int cases_per_feature = 20;
  // After the cases above, keep generating deeper rounds until this many
  // seconds have passed since the suite started (0: none).
  double budget_seconds = 0;
  // Wall-clock limit of one case on an in-process backend: a transport
  // whose run_until never returns fails the case (and stops the suite)
  // instead of hanging it. Process backends have their own (timeout_ns).
  double case_timeout_seconds = 120;
  std::uint64_t seed = 1;                     // of the generated cases
  // Called before each case: (index, total, "feature/name").
  std::function<void(int, int, const std::string&)> progress;
};

// A case: a scenario, a generated property case, or a scenario file that
// did not load (feature "scenario_files", failed, its message the loader's).
struct CaseResult {
  std::string feature;
  std::string name;
  std::string kind;      // "scenario" or "property"
  bool passed = false;
  std::string message;   // why it failed (first lines)
  std::string replay;    // how to run it alone
  double seconds = 0;
  bool skipped = false;  // the implementation lacks an op the case needs: neither passed nor failed
  std::string skip_reason;
  std::vector<std::string> notes;  // differences where torch leaves the behaviour unspecified
};

struct SuiteResult {
  std::string backend;
  std::string implementation;  // what ran the ops ("Open MPI 4.1.4", ...)
  std::vector<CaseResult> cases;
  std::uint64_t frames = 0;    // frames delivered to collie's core over every run (0: not counted)
  // A case outlived the watchdog (its transport never returned control):
  // the suite stopped there, and its thread still runs. The caller reports
  // and ends the process without unwinding (std::quick_exit).
  bool abandoned = false;
  bool passed() const;  // nothing failed and something passed
  int failed() const;
  int skipped() const;
};

SuiteResult run_conformance(const SuiteOptions& options);

// The feature x result matrix, one row per feature.
std::string format_matrix(const SuiteResult& r);

// JUnit XML: one <testsuite> per feature, one <testcase> per case.
std::string junit_xml(const std::string& suite_name, const std::vector<CaseResult>& cases);

}  // namespace collie::conformance
