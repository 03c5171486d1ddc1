// Running a scenario on a backend and judging it.
//
// Every rank interprets the scenario's steps as a coroutine over its
// Communicator. Unless the scenario says `check: false`, every op is
// recorded -- its inputs when issued and its outputs when complete -- and
// after the run every collective call is compared with the reference oracle
// (exact for integers and for exact float inputs; within the rounding a
// different combination order can cause otherwise) and every receive with
// the matching send. A scenario passes when its outcome (ok / error / deadlock)
// is the expected one, every `expect` step held, and every check matched.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/transport.h"
#include "scenario/scenario.h"

namespace collie::scenario {

struct RunOptions {
  std::string backend;                  // empty: the scenario's own
  std::optional<std::uint64_t> seed;    // overrides the scenario's
  std::optional<int> world;             // overrides the scenario's (re-checked)
  const BackendRegistry* registry = nullptr;  // null: BackendRegistry::builtin()
  sim::FaultPlan extra_faults;                // added to the scenario's (--fault)
  std::vector<std::string> fault_args;        // their text, for the replay command
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
  // A materialised run whose tensors (all ranks together) would need more
  // than this is refused with a hint to use timing_only.
  double max_tensor_bytes = 8.0 * (1ull << 30);
  // Runs the scenario as real processes, one per rank: called with the
  // arguments of `collie` for every rank (starting "run FILE ... --rank-report
  // DIR") and the number of ranks, it starts them as one job (collie launch)
  // and returns when all have exited. Each writes its report into DIR; the
  // run is then judged as an in-process one. Hangs surface as op timeouts
  // (the scenario's, or 60 s), not as deadlock reports. Only --backend tcp.
  std::function<int(const std::vector<std::string>& args, int nprocs)> launch_ranks;
};

struct OutputLine {
  int rank = 0;
  Nanos time = 0;
  std::string text;
};

struct ScenarioResult {
  std::string file;
  std::string name;
  std::string feature;
  std::string backend;
  std::uint64_t seed = 0;
  int world = 0;
  bool passed = false;
  std::string outcome;                // "ok", "error" or "deadlock": what happened
  std::string detail;                 // the error or the deadlock report, when not ok
  std::vector<std::string> failures;  // why it did not pass, one line each
  std::vector<OutputLine> output;     // print steps, in the order they ran
  Nanos virtual_time = 0;
  std::uint64_t trace_hash = 0;
  std::uint64_t events = 0;
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
// backend does wrong: that is a failed result. Throws ScenarioError when a
// --world override makes the scenario invalid, and Error(kUsage) for an
// unknown backend.
ScenarioResult run_scenario(const Scenario& s, const RunOptions& options);

// The body of one rank process of a multi-process run (see launch_ranks):
// joins the job (env:// rendezvous), runs this rank's program over TCP and
// writes its report to `report_dir`/rank-R.cbor. Returns the exit code.
int run_scenario_rank(const Scenario& s, const RunOptions& options, const std::string& report_dir);

// Python's repr of a float ("4.0", "0.1", "1e-05"): how the seeds print items.
std::string python_float(double v);

}  // namespace collie::scenario
