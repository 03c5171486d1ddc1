// A scenario: a job described in YAML (format version 1, documented key by
// key in docs/scenarios.md) -- world, network model, groups, tensors, the
// program every rank runs, and what the run must end with.
//
// The loader (loader.h) builds a Scenario and checks it completely before
// anything runs: every error carries the file, line and column. The runner
// (runner.h) interprets it on any backend and checks every op against the
// reference oracle.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/algorithm.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/op.h"
#include "core/reduce_op.h"
#include "scenario/expr.h"
#include "scenario/location.h"
#include "sim/faults.h"
#include "sim/network_model.h"

namespace collie::scenario {

inline constexpr int kFormatVersion = 1;

struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  // The shape on every rank -- or, when a dimension depends on the rank
  // (per_rank: all_to_all_single's output of per-rank totals), on rank 0;
  // shape_on(rank) is any rank's. Every rank's is checked when loaded.
  std::vector<std::int64_t> shape;
  // The dimensions as written, when one of them uses `world` or `rank`
  // ("world * 4", "rank + 1"), and the world they were evaluated for.
  // Empty when every dimension is a number.
  std::vector<Expr> shape_exprs;
  bool per_rank = false;
  int world = 1;
  std::optional<Expr> list;  // a list of this many tensors (of `shape` each); may use world
  Expr init;                 // value of element i (of list entry j) on `rank`
  std::vector<Value> values;  // literal values instead of init (one per element), exactly as written
  Location where;
  std::size_t count() const;  // elements per tensor on rank 0 (the loader bounds it: see kMaxTensorBytes)
  std::vector<std::int64_t> shape_on(int rank) const;
  std::size_t count_on(int rank) const;
};

// The most bytes one tensor may hold (1 PiB): a shape whose product of
// dimensions is larger -- or overflows -- is refused where it is written.
// Materialised runs are bounded far lower by the runner's memory guard.
inline constexpr std::uint64_t kMaxTensorBytes = std::uint64_t{1} << 50;

struct GroupSpec {
  std::string name;
  std::vector<int> ranks;
  Location where;        // of the name
  Location ranks_where;  // of the list of ranks
};

// A step is an op (any row of core/op.h's table) or one of the program's
// own steps.
enum class StepKind { kOp, kWait, kNewGroup, kDestroyGroup, kPrint, kExpect, kUpdate };
inline constexpr std::string_view kControlSteps[] = {"wait", "new_group", "destroy_group", "print", "expect", "update"};

// all_to_all_single's output_split_sizes / input_split_sizes: rows of dim 0
// per group rank, written as a list of expressions of `rank` and `world`,
// or as one expression of `rank`, `world` and `j` (the group rank the block
// goes to or comes from). Absent: dim 0 is cut evenly.
struct SplitSizes {
  std::vector<Expr> each;
  std::optional<Expr> of_j;
  Location where;

  bool given() const { return of_j || !each.empty(); }
  // The sizes on `rank` for a group of n ranks (each.size() when listed).
  std::vector<Value> eval(int rank, int world, std::size_t n) const;
};

// One op of a batch_isend_irecv step (torch's P2POp).
struct P2PStep {
  bool is_send = true;  // isend; false: irecv
  std::string tensor;
  Expr peer;            // dst / src, global
  Expr tag;             // default 0
  Location where;
};

struct Step {
  StepKind kind = StepKind::kOp;
  // kOp: which op, and whether this call is its async form (isend/irecv,
  // or a collective given a handle: async_op=True).
  OpKind op = OpKind::kBarrier;
  bool async = false;
  Location where;
  // Who runs it: every rank, unless `ranks` lists them or `when` is given.
  std::optional<std::vector<int>> ranks;
  std::optional<Expr> when;
  // An op's arguments (which apply: core/op.h's table; docs/scenarios.md).
  std::string tensor;              // Slot::kTensor; expect/update: the tensor or list
  std::string list;                // Slot::kList
  std::string output;              // Slot::kOutput
  SplitSizes output_splits, input_splits;  // all_to_all_single
  std::string group;               // "" = world; destroy_group: the group destroyed
  std::optional<Expr> peer;        // dst / src / root (global rank)
  bool any_source = false;         // recv/irecv src: any
  Expr tag;                        // p2p tag (default 0)
  ReduceOp reduce_op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  Nanos timeout_ns = 0;            // this call's timeout (p2p, collectives, monitored_barrier)
  Nanos poll_ns = 0;               // async ops: polled (is_completed()) this long before the wait; 0: not
  bool wait_all_ranks = false;     // monitored_barrier
  std::vector<P2PStep> p2p;        // batch_isend_irecv
  std::string handle;              // async ops: the name of the Work; wait: the one to wait
  std::vector<std::string> handles;  // wait: several
  std::string text;                // print
  Location text_where;             // print: where the text starts (inside its quotes)
  std::vector<int> members;        // new_group
  std::string name;                // new_group: the group's name
  Expr value;                      // update / expect: element value (vars rank, world, i, j, x)
  std::vector<Value> equals;       // expect: literal values, exactly as written
  std::vector<Location> equals_where;  // expect: where each literal is
  bool has_value = false;
  double tolerance = 0;            // expect: absolute tolerance for floats
  std::optional<Expr> source;      // expect: the source rank a handle's receive matched
  std::string unspecified;         // expect: why torch leaves what it checks unspecified (empty: specified);
                                   // print: why it may show a tensor an op in flight writes

  const OpSpec& spec() const { return op_spec(op); }
  // The tensor or list named in slot `s` (empty: none).
  const std::string& slot(Slot s) const;
  // How messages call the step: "isend", "all_reduce", "wait", ...
  std::string kind_name() const;
};

struct Outcome {
  enum Kind { kOk, kError, kDeadlock } kind = kOk;
  std::optional<ErrorKind> error_kind;
  std::string contains;                // the error message contains this
  std::optional<int> rank;             // the error is raised on this rank
  std::vector<int> deadlocked_ranks;   // exactly these ranks are blocked
  Location where;
};

struct Scenario {
  std::string file;
  int version = kFormatVersion;
  std::string name;
  std::string description;
  int world = 1;
  bool world_overridden = false;  // `world` came from --world, not the file
  std::string backend = "sim";
  std::uint64_t seed = 1;
  sim::NetworkModel network;
  bool check = true;          // compare every op with the oracle
  // Simulate costs only: tensors get no memory, and print/expect/update
  // steps and oracle checks are skipped (sim/simulator.h, timing-only mode).
  bool timing_only = false;
  bool conformance = false;   // part of `collie conformance`
  // Why torch leaves what this scenario checks unspecified (empty: torch
  // specifies it). A library that deviates gets notes, not failures
  // (collie's core is held to it; docs/semantics.md).
  std::string unspecified;
  // Why torch leaves only how this scenario ends unspecified -- ok, an
  // error or a hang, and where (empty: it does not). A library that ends
  // otherwise than `outcome` gets a note; but every op that completes
  // must still give the oracle's values and every expect step reached
  // must hold ("if a send to oneself completes, it delivers the bytes").
  std::string unspecified_outcome;
  // Why what this scenario checks lives in a transport under collie's core
  // (a loss report, a context field, a completion queue), empty: it does
  // not. The suite skips it, saying so, on libraries that implement the ops
  // themselves (BackendInfo::collie_core false); `collie run` runs it
  // anywhere.
  std::string transport_only;
  // Why this scenario runs only where clocks are virtual (the simulator,
  // plugin transports), empty: anywhere. A world of hundreds of ranks is
  // free there and takes as many processes or sockets on a real backend;
  // the suite skips it, saying so, on TCP and libraries; `collie run` runs
  // it anywhere.
  std::string virtual_clock_only;
  std::string feature;        // its row in the conformance matrix
  std::vector<GroupSpec> groups;
  std::vector<TensorSpec> tensors;
  std::vector<Step> program;                  // SPMD: every rank
  std::map<int, std::vector<Step>> programs;  // per rank, instead of program
  std::map<int, Location> program_where;      // where each rank's program starts
  Outcome outcome;
  Location where;             // of the document
  sim::FaultPlan faults;      // injected by the simulator
  Nanos timeout_ns = 0;       // every op's timeout (0: none)

  const TensorSpec* find_tensor(const std::string& name) const;
  const GroupSpec* find_group(const std::string& name) const;
};

}  // namespace collie::scenario
