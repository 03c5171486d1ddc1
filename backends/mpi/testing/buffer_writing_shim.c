/* An MPI library wrong in one narrow place, made by interposing on Open MPI
 * or MPICH through the PMPI profiling interface: loaded into every rank with
 * `--mpirun-args "-x LD_PRELOAD=.../libmpi_buffer_writing_shim.so -x
 * COLLIE_SHIM_BUG=N"`. The values every op hands back stay right; only
 * buffers the program owns and the op must not write change, which only the
 * rank's own process can see (backends/remote/worker.cpp):
 *   COLLIE_SHIM_BUG=send_buffer      MPI_Send flips a bit of its buffer once the send returned
 *   COLLIE_SHIM_BUG=allgather_input  MPI_Allgather flips a bit of its input (used as scratch)
 * Unset: every call is the library's own. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int bug_is(const char* name) {
  const char* b = getenv("COLLIE_SHIM_BUG");
  return b && strcmp(b, name) == 0;
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  int rc = PMPI_Send(buf, count, type, dest, tag, comm);
  if (rc == MPI_SUCCESS && count > 0 && bug_is("send_buffer")) ((unsigned char*)buf)[0] ^= 1;
  return rc;
}

int MPI_Allgather(const void* in, int in_count, MPI_Datatype in_type, void* out, int out_count,
                  MPI_Datatype out_type, MPI_Comm comm) {
  int rc = PMPI_Allgather(in, in_count, in_type, out, out_count, out_type, comm);
  if (rc == MPI_SUCCESS && in_count > 0 && in != MPI_IN_PLACE && bug_is("allgather_input"))
    ((unsigned char*)in)[0] ^= 1;
  return rc;
}
