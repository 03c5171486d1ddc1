"""torch.distributed's all_reduce timed the way `collie bench` times it --
float32 sum, sizes MIN..MAX doubling, 5 warmup iterations, a barrier, then
the same number of timed iterations, the slowest rank's mean -- in a plain
torch program: the library's own figures, next to which
bench/adapters_vs_libraries.sh puts collie's torch adapter. Prints one line
per size: bytes time_us busbw_GBps. Run under `collie launch` (env://).

  python3 bench/torch_allreduce.py BACKEND MIN_BYTES MAX_BYTES
"""
import sys
import time

import torch
import torch.distributed as dist


def main():
    backend, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dist.init_process_group(backend, init_method="env://")
    n, rank = dist.get_world_size(), dist.get_rank()
    b = lo
    while b <= hi:
        t = torch.ones(b // 4, dtype=torch.float32)
        iters = max(5, min(1000, (1 << 30) // max(b, 1)))
        for _ in range(5):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            dist.all_reduce(t)
        mean = torch.tensor([(time.perf_counter_ns() - t0) / iters / 1e3], dtype=torch.float64)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)
        if rank == 0:
            us = mean.item()
            print("%d %.2f %.3f" % (b, us, b / (us * 1e-6) / 1e9 * 2 * (n - 1) / n), flush=True)
        b *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
