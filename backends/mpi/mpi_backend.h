// An MPI library as a backend under test: "mpi" runs collie-mpi-worker
// under mpirun, one process per rank, each serving its rank's ops through
// the library's C API (backends/mpi/mpi_dist.h) to the controller.
//
// Settings come from the environment, which the collie command sets from its
// flags: COLLIE_MPIRUN (--mpirun; default mpirun on PATH), COLLIE_MPIRUN_ARGS
// (--mpirun-args: more arguments, e.g. "--hostfile hosts"), COLLIE_MPI_WORKER
// (the worker program; default beside collie), COLLIE_CONTROLLER_HOST
// (--controller-host: the address ranks on other hosts connect to).
// For Open MPI, collie allows oversubscription (more ranks than cores) and,
// when it runs as root, running as root (OMPI_ALLOW_RUN_AS_ROOT).
#pragma once

#include "backends/backend_info.h"

namespace collie::mpi {

// The "mpi" backend, for the registry (backends/builtin_backends.cpp).
BackendInfo make_mpi_backend();

}  // namespace collie::mpi
