// What `collie run` reports of one run, a scenario's or a program's
// (script/script_run.h): the files written beside the result (--trace,
// --report-dot) and the text printed for it. One writer, so that a
// program's run reads as a scenario's does, byte for byte where they share.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "backends/job.h"
#include "scenario/runner.h"

namespace collie::scenario {

// A trace hash as printed: 16 hex digits.
std::string hex(std::uint64_t v);

// Fills in what the job observed of the run -- virtual time, the wait-for
// graph and its causes, faults injected, trace hash, events, frames -- and
// writes the job's Chrome trace to `trace_path` and the wait-for graph to
// `dot_path` (only when the run deadlocked); an empty path writes nothing.
// A job that records no trace adds a failure to `res`.
void take_run_files(const Job& job, const RunResult& run, std::size_t faults_injected, const std::string& trace_path,
                    const std::string& dot_path, ScenarioResult& res);

struct ReportLayout {
  std::string title;                 // after PASS/FAIL/SKIP: "FILE (NAME)", or a program's command
  // -1 (-q): no output lines; 1 (-v): lines stamped "[rank R @ T ns] ",
  // the simulator's speed in wall time, and a passed run's expected error.
  int verbosity = 0;
  bool output = true;                // print the ranks' lines first (a program's came as they ran)
  std::vector<std::string> program;  // after a failure's reasons: "in the program:", each block indented
  std::string recorded;              // --record's file, named last
};

// The run's lines (its output, then the summary line, skip reason, fault
// report, notes and, when it failed, why and how to replay it).
void print_run_report(std::ostream& os, const ScenarioResult& r, const ReportLayout& layout);

}  // namespace collie::scenario
