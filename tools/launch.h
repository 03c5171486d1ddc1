// collie launch: start N local processes of a program as one job, like
// `torchrun --standalone --nproc-per-node N`.
#pragma once

#include <string>
#include <vector>

namespace collie::tools {

struct LaunchOptions {
  int nprocs = 1;
  std::vector<std::string> command;  // program and arguments
  int master_port = 0;               // 0: a free port
  bool prefix = true;                // prefix output lines with "[rank R] "
  double grace_s = 5;                // after a rank fails, how long the others may take to notice
  // Pin local rank r to the r-th CPU this launcher may use, when there are
  // at least nprocs of them (as mpirun's --bind-to core). Off by default, as
  // torchrun: on the 2-CPU development VM pinned ranks were slower for small
  // messages (docs/PERFORMANCE.md).
  bool bind_to_core = false;
};

// Runs the job; returns the exit code for `collie launch` (0: every rank
// exited 0; 1: some rank failed -- the first to fail is reported on stderr).
int launch(const LaunchOptions& options);

// This program's own path (/proc/self/exe), to start more of itself.
std::string self_executable();

}  // namespace collie::tools
