// `collie worker --backend tcp`: one rank of a process job of the tcp
// backend, started by a collie controller (backends/remote/process_job.h):
// joins its peers by env:// rendezvous, then runs the controller's ops on
// collie's core over TCP (backends/remote/worker.h).
#pragma once

namespace collie::tools {

// Returns the process exit code.
int run_tcp_worker();

}  // namespace collie::tools
