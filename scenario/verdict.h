// The verdict: did a run end as its scenario says it must?
//
// A run passes when its outcome (ok / error / deadlock) is the expected one,
// every `expect` step held, and every op matched the oracle
// (check/op_checks.h). What counts against it depends on who implemented
// the ops:
//   - collie's core (any transport): everything -- collie promises its
//     stricter semantics (docs/semantics.md);
//   - a library (Open MPI, a torch.distributed backend): violations of
//     torch's documented semantics fail the run; differences where torch
//     leaves the behaviour unspecified -- the oracle's unspecified findings,
//     and everything about a scenario marked `unspecified:` -- are notes,
//     unless strict. An op the library does not provide (ErrorKind
//     kUnsupported) skips the run with that reason; it never passes.
#pragma once

#include <string>
#include <vector>

#include "backends/job.h"
#include "core/local_world.h"
#include "scenario/interpreter.h"
#include "scenario/scenario.h"

namespace collie::scenario {

struct Judge {
  bool collie_core = true;         // the ops are collie's core (strict)
  // Every rank ran in this process, so a deadlock was diagnosed (a report
  // with causes). Ranks in processes have no global view: a deadlock shows
  // as a hang of exactly the blocked ranks or, where ops have timeouts, as
  // timeout errors on exactly them while the rest finish.
  bool diagnoses_deadlocks = true;
  bool strict = false;             // --strict: notes count as failures
  bool records_checked = true;     // the oracle checks ran (not timing-only, check: true)
  std::vector<InjectedFault> injected;  // what the backend broke on purpose
  // Faults done to rank processes (--fault crash:... / stall:... on a
  // process backend): the run is judged by what the library did about
  // them -- every survivor failed loudly or carried on, or some hung --
  // instead of by the scenario's outcome.
  std::vector<ProcessFault> process_faults;
  // The faults are stalls only, each well inside the run's op timeout (at
  // most half of it, or the run has none), and the scenario expects its
  // ops to complete and sets no timeouts of its own: every stalled rank
  // comes back before any op may give up on it, so a survivor that fails
  // -- a library with a deadline of its own, shorter than the timeout it
  // was given -- fails the run.
  bool stalls_must_be_survived = false;
};

struct Verdict {
  std::string outcome;                // "ok", "error", "deadlock" ("hang" for a stalled real job)
  std::string detail;                 // the error or the deadlock/hang report, when not ok
  std::vector<std::string> failures;  // why it did not pass, one line (or block) each
  std::vector<std::string> notes;     // differences where torch is silent (not failures)
  std::vector<std::string> fault_report;  // process faults: what each rank did about them
  int checks = 0;                     // ops compared with the oracle or a send
  bool skipped = false;               // an op the implementation does not provide
  std::string skip_reason;
  bool passed() const { return failures.empty() && !skipped; }
};

Verdict judge(const Scenario& s, const RunResult& run, const RunLog& log, const Judge& how);

// A rank's error as text, its kind, and whether it is a collie::Error
// (else an exception of the implementation, e.g. a library's own error).
std::string error_text(const std::exception_ptr& e, ErrorKind* kind, bool* is_collie);

}  // namespace collie::scenario
