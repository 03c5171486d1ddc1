// Running an unmodified torch.distributed program on collie:
//
//   collie run [-n N] [--backend B] [--seed S] [--fault F]... -- python script.py ARGS
//
//   1. the command starts (once, or N copies with torchrun's variables)
//      with script/python/ on its PYTHONPATH, and a Hub (hub.h) listening;
//   2. the first process to call init_process_group declares the world;
//      a job of the backend is started for it (backends/job.h: the
//      simulator, or any other backend);
//   3. every rank's program in the job is a ScriptRank (script_rank.h)
//      serving that rank's process: its calls run on the backend, are
//      recorded for the oracle and answered;
//   4. the run is judged as a scenario's is (scenario/verdict.h), and every
//      report -- deadlock, mismatch, wrong value, timeout, lost rank,
//      exception -- is followed by where each rank is in the program.
//
// On the simulator the run is a function of the program and the seed (the
// same trace hash, verdict and merged output every time) as long as the
// program itself is: see script_protocol.h for how the clock is held.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "scenario/runner.h"

namespace collie::script {

struct ScriptOptions {
  std::vector<std::string> command;  // the program and its arguments (after --)
  // N copies of the command, rank r with RANK=r, WORLD_SIZE=N,
  // LOCAL_RANK=r, LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and
  // MASTER_PORT=29500 (torchrun's); 0: the command once, as it is.
  int nprocs = 0;
  std::string backend = "sim";
  const BackendRegistry* registry = nullptr;  // null: BackendRegistry::builtin()
  bool in_process = false;                    // tcp: every rank in this process
  std::uint64_t seed = 1;
  // --fault texts: the simulator's faults on a simulated backend (a crash
  // without detect_us is detected at once, as a dead process's closed
  // sockets are), crash/stall of the rank processes on a process backend.
  std::vector<std::string> faults;
  std::optional<Nanos> timeout_ns;            // every op's timeout
  Nanos compute_timeout_ns = 300'000'000'000;  // a rank between two calls (wall time)
  Nanos join_timeout_ns = 120'000'000'000;     // the ranks' init_process_group calls (wall time)
  std::string listen_host = "127.0.0.1";       // where the program's processes connect
  std::string trace_path, dot_path, record_path;
  bool strict = false;
  std::ostream* out = nullptr;                 // the program's merged output, as it becomes final
  bool stamps = false;                         // "[rank R @ T ns] " before each line
  std::vector<std::string> replay_flags;       // backend flags, for the replay command
};

struct ScriptResult {
  scenario::ScenarioResult run;       // as a scenario's: verdict, output, trace hash, replay...
  // Where every rank is in the program when the run ended: its call and
  // file:line, or how its process ended (one line or block per rank).
  std::vector<std::string> program;
  std::string record_path;            // written, when --record was given
  // Every process of the program the run saw (started, or connected); none
  // of them runs any more when run_script() returns.
  std::vector<long> processes;
};

// Runs the program and judges it. Throws Error(kUsage) for what cannot run
// at all: no command, a script file that does not exist, an unknown or
// unavailable backend, a fault the backend cannot inject, a program that
// never calls init_process_group (with its last output) -- and kills every
// process it started before it returns or throws.
ScriptResult run_script(const ScriptOptions& options);

// The command line that replays a run as printed.
std::string replay_command(const ScriptOptions& options);

}  // namespace collie::script
