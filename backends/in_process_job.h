// A job of an in-process backend: collie's core (one Communicator per
// rank, core/local_world.h) over the backend's transports, every rank on
// one executor in this process. One run per job: a simulated run is
// reproducible only from a fresh simulator.
#pragma once

#include <memory>
#include <string>

#include "backends/job.h"

namespace collie {

// `backend` serves options.world_size ranks; `name` is its --backend name.
std::unique_ptr<Job> in_process_job(std::unique_ptr<InProcessBackend> backend, const JobOptions& options,
                                    std::string name);

}  // namespace collie
