// An MPI library as a backend under test: "mpi" runs collie-mpi-worker
// under mpirun, one process per rank, each serving its rank's ops through
// the library's C API (backends/mpi/mpi_dist.h) to the controller.
//
// Settings come from the environment, which the collie command sets from its
// flags: COLLIE_MPIRUN (--mpirun; default mpirun on PATH), COLLIE_MPIRUN_ARGS
// (--mpirun-args: more arguments, e.g. "--hostfile hosts"), COLLIE_MPI_WORKER
// (--mpi-worker: the worker program; default beside collie), COLLIE_CONTROLLER_HOST
// (--controller-host: the address ranks on other hosts connect to).
// For Open MPI, collie allows oversubscription (more ranks than cores) and,
// when it runs as root, running as root (OMPI_ALLOW_RUN_AS_ROOT).
//
// The worker must be built against the launcher's MPI: started by another
// MPI's mpirun, each worker process comes up alone (rank 0 of 1), and the
// failed start says so, naming both (mpi_version.h) and the way out -- a
// worker built for that MPI (cmake -DCOLLIE_EXTRA_MPI=NAME=MPICC builds
// collie-mpi-worker-NAME, docs/external_backends.md).
#pragma once

#include "backends/backend_info.h"

namespace collie::mpi {

// The "mpi" backend, for the registry (backends/builtin_backends.cpp).
BackendInfo make_mpi_backend();

}  // namespace collie::mpi
