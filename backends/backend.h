// In-process backends: N ranks of a job in this process, each a Transport
// under collie's core (core/transport.h), all driven by one executor (see
// core/local_world.h for the contract). This is what a transport plugin
// implements (backends/plugin.h, docs/backends.md).
//
// Built in: "sim" (the deterministic simulator) and "tcp" (real sockets on
// 127.0.0.1). Libraries that implement the ops themselves (Open MPI,
// torch.distributed) are not transports: they run as jobs of processes
// through the op-level seam (backends/job.h, backends/registry.h).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/diagnosis.h"
#include "core/dist.h"
#include "core/observer.h"
#include "core/transport.h"

namespace collie {

namespace sim {
struct SimulationOptions;  // sim/simulation_options.h: read by simulated backends only
}
class Communicator;  // core/communicator.h

struct BackendOptions {
  int world_size = 1;
  std::uint64_t seed = 1;  // every random choice of the backend
  bool trace = false;      // record a trace (write_trace)
  // Payloads are not materialised: tensors have no memory (simulated
  // backends that declare timing_only only).
  bool timing_only = false;
  // The simulator's cost model, faults and scheduling hook; null for
  // backends that are not simulated. Plugins ignore it.
  const sim::SimulationOptions* simulation = nullptr;
};

class InProcessBackend {
 public:
  virtual ~InProcessBackend() = default;
  // Rank r's transport, valid for the backend's lifetime; rank() == r.
  virtual Transport& transport(int rank) = 0;
  // Simulated backends report a trace hash and event count; others 0.
  virtual std::uint64_t trace_hash() const { return 0; }
  virtual std::uint64_t events() const { return 0; }
  // Receives every op and step event (fault injection, traces); may be null.
  virtual OpObserver* observer() { return nullptr; }
  // What the backend broke on purpose, and which ranks it crashed.
  virtual std::vector<InjectedFault> injected_faults() const { return {}; }
  virtual bool crashed(int rank) const { (void)rank; return false; }
  // Whether crash() works. Crash faults on a backend that cannot are
  // refused (the case is skipped), never silently ignored.
  virtual bool can_crash() const { return false; }
  // Kills `rank` as its process dying would (a scenario's `{fault: crash,
  // rank: R, op: K}`): from this call on its transport sends, delivers and
  // resumes nothing, and the other ranks' transports report the loss as
  // they would detect it -- FrameSink::on_peer_lost(rank, why, clean=false),
  // from inside run_until(), at once or after a detection delay, but never
  // not at all. crashed(rank) is true afterwards. Called from inside
  // run_until() (an op of `rank` is starting).
  virtual void crash(int rank, const std::string& why) { (void)rank; (void)why; }
  // Writes the run's Chrome trace; false when the backend records none.
  virtual bool write_trace(std::ostream& out, Nanos end) const { (void)out; (void)end; return false; }
  // For transports whose ranks take tensors in device memory only
  // (Transport::memory_space()): a Dist over `rank` (collie's core on this
  // backend's transport) that takes host tensors, as scenarios and property
  // cases hold them, moving each op's tensors to the device and back. The
  // job hands it to rank programs instead of `rank`. Null, the default:
  // the transport takes host tensors.
  virtual std::unique_ptr<Dist> host_tensor_dist(Communicator& rank) { (void)rank; return nullptr; }
};

}  // namespace collie
