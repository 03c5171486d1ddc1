// Running a scenario on a backend and judging it.
//
//   loader (scenario.h)  -> the scenario, checked, overrides resolved
//   runner (this)        -> a job of the backend (backends/job.h); every
//                           rank's Interpreter (interpreter.h) over its Dist
//   verdict (verdict.h)  -> outcome, expect steps, oracle checks
//
// The runner never learns which implementation ran the ops: collie's core
// in this process, or one process per rank of another library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/memory_guard.h"
#include "scenario/interpreter.h"
#include "scenario/scenario.h"

namespace collie {
class JobCache;
namespace sim {
class Explorer;
}
}  // namespace collie

namespace collie::scenario {

struct RunOptions {
  std::string backend;                  // empty: the scenario's own
  const BackendRegistry* registry = nullptr;  // null: BackendRegistry::builtin()
  // Run the backend's ranks as processes (a backend that has both forms:
  // tcp). Backends that only run as processes always do.
  bool processes = false;
  // Keeps a process job running between runs (collie conformance); null:
  // every run starts and ends its own job.
  JobCache* jobs = nullptr;
  std::optional<std::uint64_t> seed;    // overrides the scenario's
  sim::FaultPlan extra_faults;                // added to the scenario's (--fault)
  std::vector<std::string> fault_args;        // their text, for the replay command
  std::vector<ProcessFault> process_faults;   // crash/stall of rank processes (--fault)
  std::optional<std::uint64_t> random_faults_seed;  // add random_fault_plan(seed) (collie fuzz)
  bool destructive_faults = false;            // ... including drops, partitions, crashes
  std::optional<Nanos> timeout_ns;            // every op's timeout, overriding the scenario's
  std::string trace_path;                     // write a Chrome trace here
  std::string dot_path;                       // write the wait-for graph here (on deadlock)
  sim::Explorer* explorer = nullptr;          // let the simulator's choices be made by it
  std::optional<std::size_t> eager_threshold_bytes;  // overrides the scenario's buffering
  // Replaces the scenario's network model (collie run --profile FILE, a
  // profile written by collie calibrate); profile_path is shown in replays.
  std::optional<sim::NetworkModel> network;
  std::string profile_path;
  // Simulate costs only (as the scenario's timing_only: true): tensors get
  // no memory, print/expect/update steps and oracle checks are skipped.
  bool timing_only = false;
  // A materialised run that would need more memory than this -- every
  // rank's tensors, and when checking the copies recorded for the oracle --
  // is refused up front, with the figure and the way out (timing_only).
  double max_tensor_bytes = kMemoryGuardBytes;
  // Differences where torch leaves the behaviour unspecified fail a
  // library's run too (they always fail collie's core).
  bool strict = false;
  // Appended to the replay command, so that it runs as printed
  // (--backend-plugin PATH, --torch-import MODULE, ...).
  std::vector<std::string> replay_flags;
};

// What a materialised run of `s` needs in memory, as its guard
// (RunOptions::max_tensor_bytes) weighs it: every rank's tensors and, when
// the scenario checks, the copies recorded for the oracle.
double memory_needed(const Scenario& s);

// A result's failures, notes and fault report keep their first
// kMaxFailures entries and then one "... and N more failures"; each entry,
// and the detail, its first kMaxLinesPerFailure lines and then "... and N
// more lines": what a run says is bounded whatever the world size.
inline constexpr std::size_t kMaxFailures = 50;
inline constexpr std::size_t kMaxLinesPerFailure = 200;

struct ScenarioResult {
  std::string file;
  std::string name;
  std::string feature;
  std::string backend;
  std::string implementation;         // what ran the ops ("collie core over sim", "Open MPI 4.1.4")
  std::uint64_t seed = 0;
  int world = 0;
  bool passed = false;
  bool skipped = false;               // an op the implementation does not provide
  std::string skip_reason;
  std::string outcome;                // "ok", "error", "deadlock", "hang" or "skipped": what happened
  std::string detail;                 // the error or the deadlock report, when not ok
  std::vector<std::string> failures;  // why it did not pass, one line each
  std::vector<std::string> notes;     // differences where torch is silent (not failures)
  std::vector<std::string> fault_report;  // process faults: what each rank did about them
  std::vector<OutputLine> output;     // print steps, in the order they ran
  Nanos virtual_time = 0;
  std::uint64_t trace_hash = 0;
  std::uint64_t events = 0;
  std::uint64_t frames = 0;           // frames delivered (collie's core; 0 for process backends)
  bool simulated = false;
  int checks = 0;                     // ops compared with the oracle or a send
  double wall_seconds = 0;
  std::string replay;                 // the command that replays this run
  std::string deadlock_dot;           // the wait-for graph, when deadlocked
  std::vector<std::string> causes;    // the diagnosis's root causes, when deadlocked
  std::size_t faults_injected = 0;    // frames lost and ranks crashed on purpose
  bool timing_only = false;           // costs only: no payloads, no checks
  int skipped_steps = 0;              // print/expect/update steps timing-only skipped (rank 0's)
};

// Runs `s` as `options` say. Never throws for anything the scenario or the
// implementation does wrong: that is a failed result. Throws Error(kUsage)
// for what cannot run at all: an unknown or unavailable backend, faults the
// backend cannot inject, a run too large to materialise.
ScenarioResult run_scenario(const Scenario& s, const RunOptions& options);

}  // namespace collie::scenario
