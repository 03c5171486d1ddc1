/* The peer side of bench/sim_vs_smpi.sh: MPI_Allreduce of BYTES of float32,
 * in place, ITERS times, with real data -- the program SMPI simulates.
 * Usage: smpi_allreduce BYTES ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
  const int iters = argc > 2 ? atoi(argv[2]) : 10;
  const long count = bytes / (long)sizeof(float);
  float* buf = malloc((size_t)count * sizeof(float));
  for (long i = 0; i < count; ++i) buf[i] = (float)((rank + i) & 7);
  const double t0 = MPI_Wtime();
  for (int it = 0; it < iters; ++it) MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double t1 = MPI_Wtime();
  if (rank == 0) printf("smpi: ranks %d bytes %ld iters %d simulated_s %.6f check %.1f\n", size, bytes, iters, t1 - t0, buf[1]);
  free(buf);
  MPI_Finalize();
  return 0;
}
