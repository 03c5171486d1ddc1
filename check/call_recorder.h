// CallRecorder: takes one rank's records (check/op_records.h) at the
// op-level seam, from the calls themselves (core/op.h). The scenario
// interpreter and the property cases both record through it, so the
// oracle is applied to both by check_collectives() and check_p2p() alone.
//
// What it records follows op_table(): a collective's inputs are the
// operands this rank reads, its outputs the operands it writes, each cut
// into group-size blocks where the table says the oracle sees blocks. On
// the way it checks what the seam alone can see: an operand an op only
// reads must be unchanged when the op completes, a send's buffer likewise,
// and a rank outside an op's group must find every buffer it passed
// untouched (OpRecords::buffer_findings).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>
#include <string>

#include "check/op_records.h"
#include "core/op.h"

namespace collie::check {

class CallRecorder {
 public:
  // `records` outlives the recorder; ranks are global.
  CallRecorder(OpRecords& records, int rank, int world_size);

  // Records what `c` reads, just before it is dispatched. `group` is the
  // name reports give its group (records are keyed by it), `where` the
  // call site ("f.yaml:12:5") or a description of the call. Returns what
  // to call once the call's Work has completed without an error (it
  // records the outputs and checks the buffers), or an empty function when
  // records are disabled. Tensors must be host memory.
  std::function<void(const Work&)> before(const DistCall& c, const std::string& group, const std::string& where);

  // Tells the recorder the Work that dispatching the call last given to
  // before() returned: its op id (OpInfo::id) is kept with what before()
  // recorded (the sends, the collective's call), so that the checks can
  // set apart the calls a crashed rank never issued (check/op_checks.h,
  // NeverIssued). Call it right after the dispatch, before the next
  // before().
  void issued(const Work& w);

  // The sequence number the next collective on `group` will get (1-based).
  std::uint64_t next_seq(const std::string& group) const;

 private:
  std::function<void(const Work&)> collective(const DistCall& c, const std::string& group, const std::string& where);
  std::function<void(const Work&)> point_to_point(const DistCall& c, const std::string& group,
                                                  const std::string& where);
  std::function<void(const Work&)> untouched(const DistCall& c, const std::string& group, const std::string& where);

  OpRecords& records_;
  int rank_;
  int world_;
  std::map<std::string, std::uint64_t> seq_;  // collectives issued, by group
  std::uint64_t recv_order_ = 0;
  // What the last before() recorded, until issued() stamps it.
  std::vector<std::pair<std::tuple<int, int, std::string, int>, std::size_t>> unstamped_sends_;
  std::optional<std::pair<std::string, std::uint64_t>> unstamped_collective_;
};

}  // namespace collie::check
