/* Open MPI's MPI_Allreduce timed the way `collie bench` times all_reduce:
 * float32 sum, the same sizes, 5 warmup iterations, a barrier, then the same
 * number of timed iterations; the slowest rank's mean. Prints one line per
 * size: bytes time_us busbw_GBps. Run under mpirun (bench/tcp_vs_peers.sh). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int iters_for(unsigned long long bytes) {
  unsigned long long it = (1ull << 30) / (bytes ? bytes : 1);
  if (it < 5) it = 5;
  if (it > 1000) it = 1000;
  return (int)it;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  unsigned long long min_b = argc > 1 ? strtoull(argv[1], 0, 10) : 8;
  unsigned long long max_b = argc > 2 ? strtoull(argv[2], 0, 10) : (64ull << 20);
  float* buf = malloc(max_b);
  float* out = malloc(max_b);
  for (unsigned long long i = 0; i < max_b / 4; ++i) buf[i] = 1.0f;
  for (unsigned long long b = min_b; b <= max_b; b *= 2) {
    int count = (int)(b / 4);
    int iters = iters_for(b);
    for (int i = 0; i < 5; ++i) MPI_Allreduce(buf, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(buf, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mean = (MPI_Wtime() - t0) / iters, slowest;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
      printf("%llu %.2f %.3f\n", b, slowest * 1e6, (double)b / slowest / 1e9 * 2.0 * (n - 1) / n);
  }
  free(buf);
  free(out);
  MPI_Finalize();
  return 0;
}
