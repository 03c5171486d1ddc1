// The interpreter: one rank's part of a scenario, run as a coroutine over
// the op-level seam (core/dist.h) -- the same code whatever implements the
// ops. Unless the scenario says `check: false`, it records every op's
// inputs when issued and outputs when complete (check/op_records.h) for the
// checks that judge the run after it ends.
#pragma once

#include <string>
#include <vector>

#include "check/op_records.h"
#include "core/dist.h"
#include "core/task.h"
#include "scenario/scenario.h"

namespace collie::scenario {

struct OutputLine {
  int rank = 0;
  Nanos time = 0;  // the rank's clock when it printed
  std::string text;
};

// What the ranks of one run leave behind, written by every rank's
// interpreter (all of them run on one thread).
struct RunLog {
  check::OpRecords records;
  std::vector<OutputLine> output;      // print steps, in the order they ran
  std::vector<std::string> failures;   // expect steps, print and buffer-use errors, one line each
  // expect steps marked `unspecified:` that did not hold: torch leaves what
  // they check unspecified (a note for a library, a failure for collie's core)
  std::vector<std::string> unspecified_failures;
  int skipped_steps = 0;               // print/expect/update steps timing-only skipped (rank 0's)
};

class Interpreter {
 public:
  // `s` and `log` outlive the interpreter. timing_only: tensors have no
  // memory; print/expect/update steps are skipped and nothing is recorded.
  Interpreter(const Scenario& s, Dist& dist, RunLog& log, bool timing_only);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // The rank's program: its tensors and groups, then its steps; waits for
  // every handle left unfinished at the end. Throws what an op throws.
  Task<void> run();

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace collie::scenario
