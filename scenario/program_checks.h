// The whole-program checks of a scenario the loader has read: every name a
// step uses exists and is of the right sort (tensor or list, group,
// handle, print field), and what each step computes is valid on every rank
// it applies to -- ranks, roots, tags and sources against the world and
// the group, list lengths against group sizes, operands' shapes against
// each other (core/op.h's table says which operands each op takes), split
// sizes, reduce ops against dtypes, literal values against dtypes.
//
// The loader runs them after reading the file, with the world the run will
// have (the file's or --world's). The first problem is thrown as a
// ScenarioError naming file, line and column.
#pragma once

#include "scenario/scenario.h"

namespace collie::scenario {

void check_program(const Scenario& s);

}  // namespace collie::scenario
