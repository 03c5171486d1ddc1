// What a scenario run records for the checks: every collective call's
// inputs and outputs per rank, every send and receive. One process records
// every rank of an in-process run; a rank process of a multi-process run
// records its own and sends it to the parent (rank_report.h), which merges
// them and checks as if the run had been in one process.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/reduce_op.h"
#include "core/tensor.h"
#include "scenario/location.h"
#include "scenario/scenario.h"

namespace collie::scenario {

struct CollRecord {
  StepKind kind = StepKind::kBarrier;
  Location where;
  std::vector<int> members;  // sorted global ranks
  int root = -1;             // global
  ReduceOp op = ReduceOp::kSum;
  std::map<int, std::vector<Tensor>> inputs;   // by global rank
  std::map<int, std::vector<Tensor>> outputs;  // by global rank, once complete
  std::set<int> issued;
};

struct RecvRecord {
  int rank = -1;
  std::string group;
  int tag = 0;
  int source = -1;
  std::uint64_t order = 0;  // posting order on the rank
  Tensor data;
  Location where;
};

struct Recorder {
  bool enabled = true;
  std::map<std::pair<std::string, std::uint64_t>, CollRecord> colls;
  std::map<std::tuple<int, int, std::string, int>, std::vector<Tensor>> sends;  // (src,dst,group,tag)
  std::vector<RecvRecord> recvs;
};

}  // namespace collie::scenario
