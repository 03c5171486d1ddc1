// Reading scenario files.
//
// A scenario is checked completely when it is loaded: YAML syntax, every key
// (unknown keys get a did-you-mean), every type, required keys, names of
// tensors, groups and handles (unknown or duplicate), ranks and roots against
// the world size (evaluated for every rank a step applies to), list lengths
// against group sizes, shapes, reduce ops against dtypes. The first problem
// is thrown as a ScenarioError naming file, line and column. Nothing runs
// half-way: a scenario that loads is one the runner can execute.
#pragma once

#include <optional>
#include <string>

#include "scenario/scenario.h"

namespace collie::scenario {

// What the command line says instead of the file. The scenario is loaded
// and checked exactly as if the file said it.
struct LoadOverrides {
  std::optional<int> world;  // collie run/validate --world N
};

Scenario load_file(const std::string& path, const LoadOverrides& overrides = {});
Scenario load_text(const std::string& text, const std::string& file_name, const LoadOverrides& overrides = {});

// Reads a network profile written by `collie calibrate` (YAML: version: 1 and
// a network: map with the keys of a scenario's network section). Throws
// ScenarioError with file:line:column.
sim::NetworkModel load_profile(const std::string& path);

}  // namespace collie::scenario
