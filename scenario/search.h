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

// How sends are buffered in an explored run: as the scenario's network
// configures (eager up to its threshold), every send rendezvous, every send
// eager. `collie explore --buffering` names them configured, rendezvous, eager.
enum class Buffering { kConfigured, kRendezvous, kEager };
const char* buffering_flag(Buffering b);  // "configured", "rendezvous", "eager"

struct ExploreOptions {
  std::size_t max_runs = 2000;  // the bound on runs, over all modes; at least 1
  bool with_faults = false;     // also try each single fault of a small set
  // Replay just this schedule (collie explore --schedule), under `buffering`.
  // A choice that the run never offers, or one beyond the alternatives it
  // offers, is an error (Error kUsage) -- never silently another order.
  std::vector<int> schedule;
  Buffering buffering = Buffering::kConfigured;
  // Every run's options. Its faults (base.extra_faults, with their text in
  // base.fault_args: collie explore --fault) are added to every run, and to
  // every replay line.
  RunOptions base;
};

struct ExploreFinding {
  std::string signature;
  std::string mode;                  // buffering ("eager up to 65536 bytes", ...) and fault, if any
  Buffering buffering = Buffering::kConfigured;
  std::vector<std::string> faults;   // every fault of the run, as --fault takes them
  std::vector<int> schedule;         // the choices that reach it
  std::vector<std::string> choices;  // what those choices mean
  ScenarioResult result;
};

struct ExploreResult {
  std::size_t runs = 0;
  std::size_t schedules = 0;               // runs under the buffering modes, without a fault of the set
  std::size_t fault_placements = 0;        // runs with one fault of the set (each on the default order)
  std::size_t fault_placements_total = 0;  // the faults of the set
  bool exhausted = false;                  // every schedule of every mode, and every fault, was tried
  std::vector<ExploreFinding> findings;    // one per distinct failure
};

// Enumerates delivery orders (see sim/explorer.h) under three buffering
// modes -- as configured, every send rendezvous, every send eager -- and,
// with_faults, under each single fault of a set (dropping a channel's first
// message, crashing a rank at its first op) on the default order. The
// bound is shared: every mode's default order runs first (so a small bound
// still tries every fault), then the buffering modes' searches take turns.
// Throws Error(kUsage) for a schedule that does not fit the program.
ExploreResult explore(const Scenario& s, const ExploreOptions& o);

// The command that replays a finding as it was found -- its schedule, its
// buffering and its faults -- shell-quoted: `collie explore FILE --schedule
// 1,0 --buffering rendezvous --fault drop:src=0,dst=1,nth=1 -v`.
std::string explore_replay(const std::string& file, const ExploreFinding& f);

}  // namespace collie::scenario
