// What the registry lists of one backend (backends/registry.h): its name,
// how a user selects it, what it honours, and how it starts -- transports
// for N ranks in this process (create), or N rank processes (start). A
// backend describes itself in one of these (backends/tcp/tcp_backend.h:
// make_tcp_backend()) and includes nothing of the registry.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "backends/job.h"

namespace collie {

struct BackendInfo {
  std::string name;         // what --backend takes
  std::string description;  // one line
  std::string selection;    // how a user selects it
  bool simulated = false;   // virtual time and trace hashes are meaningful
  bool timing_only = false; // honours timing_only (payloads not materialised)
  // now() counts events, not nanoseconds (the cuda transport's logical
  // clock, which makes HostRuntime runs a function of the seed): whatever
  // times ops (collie bench) uses the host's clock instead.
  bool logical_clock = false;
  // now() is the host's clock (real TCP): a scenario that waits out a long
  // timeout takes that long in wall time (the suite leaves those out).
  bool wall_clock = false;
  // The ops are collie's core over a transport: collie's stricter semantics
  // are promised (an unspecified-in-torch difference is a failure, not a
  // note) and deadlocks are diagnosed. False for libraries that implement
  // the ops themselves.
  bool collie_core = true;
  // Injects the simulator's faults (drop, delay, partition, crash at a
  // time or step, ...).
  bool simulated_faults = false;
  // Empty when ops fail with a timeout error once their timeout (the
  // group's or the call's) has passed; else why the implementation has no
  // timeouts ("MPI operations block until they complete"). A scenario that
  // sets timeouts is skipped on such a backend with this reason.
  std::string no_timeouts;
  // Null when the backend can run on this machine; else why not
  // ("mpirun was not found in PATH").
  std::function<std::optional<std::string>()> unavailable;
  // In-process: transports for N ranks.
  std::function<std::unique_ptr<InProcessBackend>(const BackendOptions&)> create;
  // Processes: starts a job of options.world_size rank processes; throws
  // Error(kUsage) with a one-line reason when the job cannot start (a
  // missing program, a launcher that refuses). Supports ProcessFaults.
  std::function<std::unique_ptr<Job>(const JobOptions&)> start;
};

// A family of backends named "PREFIX:anything" (torch:gloo, torch:mine):
// the registry makes the member for a name on first use.
struct BackendFamily {
  std::string prefix;
  std::function<BackendInfo(const std::string& name)> make;
  std::string description, selection;
};

}  // namespace collie
