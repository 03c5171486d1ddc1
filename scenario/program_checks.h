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

// The values a materialised run computes before it can fail on them,
// computed now: every tensor's `init` on every rank, for every list entry
// and element, and every `expect` step's `value` on every rank it applies
// to -- throwing the ScenarioError the run would throw (a division by zero,
// a value its dtype cannot hold), at the expression. What only the run can
// know (`update` steps, which read the tensors) is not evaluated; a
// timing-only scenario evaluates nothing. Each expression is evaluated once
// per combination of the variables it uses (rank + 1 once per rank, 7 once).
// collie validate calls it after loading, so that it refuses what run
// refuses.
void check_values(const Scenario& s);

}  // namespace collie::scenario
