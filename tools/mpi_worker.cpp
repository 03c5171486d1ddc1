// collie-mpi-worker: one rank of a process job of the mpi backend, started
// by mpirun for a collie controller (COLLIE_CONTROLLER, COLLIE_JOB_TOKEN):
// runs the controller's ops with the MPI library (backends/mpi/mpi_dist.h).
#include <mpi.h>

#include "backends/mpi/mpi_dist.h"
#include "backends/remote/worker.h"
#include "tools/bench.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    collie::mpi::MpiDist dist(MPI_COMM_WORLD);
    collie::remote::WorkerHooks hooks;
    hooks.begin_run = [&dist] { dist.free_groups(); };
    hooks.poll = [&dist](const std::function<bool()>& done) { return dist.library_executor().poll(done); };
    hooks.bench = [](collie::Dist& d, const nlohmann::json& options) {
      return collie::tools::bench_in_this_rank(d, options);
    };
    hooks.world_is_the_default_group = true;  // MPI has no op timeouts: runs of the whole job use MPI_COMM_WORLD
    hooks.no_strided_views =
        "collie's MPI adapter hands MPI contiguous buffers only (a strided buffer is an MPI derived datatype, "
        "which it does not build)";
    rc = collie::remote::serve_ops(dist, collie::mpi::MpiDist::library_version(), hooks);
  }
  // Without the controller's "end" the other ranks may never reach
  // MPI_Finalize: end the whole job instead of waiting for them.
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
