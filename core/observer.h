// OpObserver: what the core reports about its ops as they run, for traces
// (sim/trace) and fault injection that targets ops (crash at the k-th op or
// at a named algorithm step). Observing never changes behaviour.
//
// Called from the transport's executor, in the order things happen, with the
// rank's clock.
#pragma once

#include <cstdint>
#include <string>

#include "core/op_info.h"
#include "core/transport.h"

namespace collie {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // A user-level op (send, all_reduce, ...) was issued; `id` is unique per rank.
  virtual void op_begin(int rank, std::uint64_t id, const OpInfo& info, Nanos now) = 0;
  // It finished; `error` is empty on success.
  virtual void op_end(int rank, std::uint64_t id, const std::string& error, Nanos now) = 0;
  // A collective entered an algorithm step ("reduce_scatter 2").
  virtual void step_begin(int rank, std::uint64_t id, const std::string& step, Nanos now) = 0;

  // Whether op_end() and step_begin() are wanted for ops that start now.
  // They cost at every op and step of every rank (a completion hook on
  // each op's Work, a step's name made as text), so an observer that does
  // nothing with them says so; op_begin() is always called.
  virtual bool wants_op_end() const { return true; }
  virtual bool wants_steps() const { return true; }
};

}  // namespace collie
