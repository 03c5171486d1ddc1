#include "scenario/run_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace collie::scenario {

namespace {

void print_block(std::ostream& os, const std::string& text, const std::string& indent) {
  std::istringstream lines(text);
  std::string l;
  while (std::getline(lines, l)) os << indent << l << "\n";
}

}  // namespace

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

void take_run_files(const Job& job, const RunResult& run, std::size_t faults_injected, const std::string& trace_path,
                    const std::string& dot_path, ScenarioResult& res) {
  res.virtual_time = std::max(run.end_time, run.stopped_at);
  res.deadlock_dot = run.deadlock_dot;
  res.causes = run.causes;
  res.faults_injected = faults_injected;
  if (!trace_path.empty()) {
    std::ofstream f(trace_path, std::ios::binary);
    if (!job.write_trace(f, res.virtual_time))
      res.failures.push_back("backend '" + res.backend + "' records no trace; --trace needs the simulator");
  }
  if (!dot_path.empty() && !run.deadlock_dot.empty()) {
    std::ofstream f(dot_path, std::ios::binary);
    f << run.deadlock_dot;
  }
  res.trace_hash = job.trace_hash();
  res.events = job.events();
  res.frames = run.frames;
}

void print_run_report(std::ostream& os, const ScenarioResult& r, const ReportLayout& layout) {
  const int verbosity = layout.verbosity;
  if (layout.output && verbosity >= 0) {
    for (const auto& l : r.output) {
      if (verbosity > 0) os << "[rank " << l.rank << " @ " << l.time << " ns] ";
      os << l.text << "\n";
    }
  }
  std::ostringstream s;
  s << (r.skipped ? "SKIP " : r.passed ? "PASS " : "FAIL ") << layout.title << ": " << r.outcome << "; world "
    << r.world << "; backend " << r.backend;
  if (r.simulated) s << "; virtual time " << r.virtual_time << " ns; trace " << hex(r.trace_hash);
  if (r.timing_only) {
    s << "; timing only";
    if (r.skipped_steps) s << " (" << r.skipped_steps << " print/expect/update steps skipped)";
  } else {
    s << "; " << r.checks << " checks";
  }
  s << "; seed " << r.seed;
  if (r.simulated && r.events) {
    s << "; " << r.events << " events";
    // The simulator's speed in wall time: -v only, so that the default
    // output is the same bytes for the same inputs and seed.
    if (verbosity > 0) {
      std::ostringstream rate;
      rate.precision(2);
      rate << std::fixed << static_cast<double>(r.events) / std::max(r.wall_seconds, 1e-9) / 1e6;
      s << " in " << std::fixed << std::setprecision(2) << r.wall_seconds << " s (" << rate.str() << " M events/s)";
    }
  }
  if (!r.implementation.empty() && !r.simulated) s << "; " << r.implementation;
  os << s.str() << "\n";
  if (r.skipped) os << "    skipped: " << r.skip_reason << "\n";
  for (const auto& l : r.fault_report) os << "    " << l << "\n";
  for (const auto& n : r.notes) print_block(os, "note: " + n, "    ");
  if (!r.passed && !r.skipped) {
    bool replay_shown = false;
    for (const auto& f : r.failures) {
      replay_shown = replay_shown || f.find("\nreplay: ") != std::string::npos || f.rfind("replay: ", 0) == 0;
      print_block(os, f, "    ");
    }
    if (!layout.program.empty()) {
      os << "    in the program:\n";
      for (const auto& p : layout.program) print_block(os, p, "      ");
    }
    if (!replay_shown) os << "    replay: " << r.replay << "\n";
  } else if (verbosity > 0 && r.outcome != "ok") {
    os << "    (expected)\n";
    print_block(os, r.detail, "    ");
  }
  if (!layout.recorded.empty())
    os << "    recorded: " << layout.recorded << " (collie run " << layout.recorded << " replays it)\n";
}

}  // namespace collie::scenario
