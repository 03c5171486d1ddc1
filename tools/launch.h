// collie launch: start N local processes of a program as one job, like
// `torchrun --standalone --nproc-per-node N`: rank r gets RANK=r,
// LOCAL_RANK=r, WORLD_SIZE=N, LOCAL_WORLD_SIZE=N, GROUP_RANK=0,
// MASTER_ADDR/MASTER_PORT of rank 0's rendezvous and a COLLIE_JOB_TOKEN.
//
// Under another launcher -- `srun -n T collie launch -n N ...`, `mpirun`:
// one launch per task, as torchrun is started once per node -- the T tasks
// are one job of T x N ranks: task t (SLURM_PROCID, OMPI_COMM_WORLD_RANK or
// PMI_RANK, of SLURM_NTASKS/OMPI_COMM_WORLD_SIZE/PMI_SIZE) starts ranks
// t*N .. t*N+N-1 with GROUP_RANK=t. MASTER_ADDR, MASTER_PORT and
// COLLIE_JOB_TOKEN are then taken from the environment (default
// 127.0.0.1, 29500 and no token): what every task must agree on. A
// COLLIE_JOB_TOKEN already set (collie run's, for a program under it) is
// always passed on.
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
// exited 0; 1: some rank failed -- the first to fail is reported on stderr;
// 2: the outer launcher's variables name no task of a job).
int launch(const LaunchOptions& options);

// This program's own path (/proc/self/exe), to start more of itself.
std::string self_executable();

}  // namespace collie::tools
