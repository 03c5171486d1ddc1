// Searching for runs that fail: random fault profiles over many seeds
// (fuzz, with shrinking), and systematic exploration of a program's
// nondeterminism (explore).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scenario/runner.h"
#include "scenario/scenario.h"

namespace collie::scenario {

// A short, time-free name for how a run failed; runs with the same
// signature failed the same way ("deadlock blocked=0 | rank 2 finished ...").
std::string failure_signature(const ScenarioResult& r);

// ---- fuzz -------------------------------------------------------------------

struct FuzzOptions {
  std::uint64_t first_seed = 1;
  std::uint64_t last_seed = 100;
  bool destructive = false;  // profiles may drop, partition and crash
  RunOptions base;           // backend, timeout, ...
  std::function<void(std::uint64_t seed, std::size_t done, std::size_t total)> progress;
};

struct FuzzFailure {
  std::uint64_t seed = 0;
  ScenarioResult result;
};

struct FuzzResult {
  std::size_t runs = 0;
  std::vector<FuzzFailure> failures;
};

// Runs the scenario once per seed, the simulator seeded with it and a random
// fault profile drawn from it. A benign profile must not change the outcome
// (the core masks delay, duplication and reordering): any failure counts.
// With destructive profiles the run may end in an error or a deadlock, which
// is expected; what counts is a wrong result (an oracle or expect failure).
FuzzResult fuzz(const Scenario& s, const FuzzOptions& o);

// Reduces a failing run -- the scenario at `path` with `seed` and its random
// profile -- to a minimal one that still fails the same way: faults are
// made explicit and removed one at a time, then program steps. Returns the
// minimised scenario as YAML (with `seed:` and `faults:` set) and writes a
// summary of what was removed into `summary`.
std::string shrink(const std::string& path, std::uint64_t seed, bool destructive, const RunOptions& base,
                   std::string* summary);

// ---- explore ----------------------------------------------------------------

struct ExploreOptions {
  std::size_t max_runs = 2000;  // the bound on runs, over all buffering modes
  bool with_faults = false;     // also try each single fault of a small set
  std::vector<int> schedule;    // replay just this schedule (collie explore --schedule)
  RunOptions base;
};

struct ExploreFinding {
  std::string signature;
  std::string mode;                  // buffering ("eager up to 65536 bytes", ...) and fault, if any
  std::vector<int> schedule;         // the choices that reach it
  std::vector<std::string> choices;  // what those choices mean
  ScenarioResult result;
};

struct ExploreResult {
  std::size_t runs = 0;
  bool exhausted = false;                // every schedule within the bound was tried
  std::vector<ExploreFinding> findings;  // one per distinct failure
};

// Enumerates delivery orders (see sim/explorer.h) under three buffering
// modes -- as configured, every send rendezvous, every send eager -- and,
// with_faults, under each single fault of a set (dropping a channel's first
// message, crashing a rank at its first op) on the default order.
ExploreResult explore(const Scenario& s, const ExploreOptions& o);

}  // namespace collie::scenario
