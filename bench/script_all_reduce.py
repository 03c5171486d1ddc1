"""The per-op round trip of `collie run -- python ...`: a torch.distributed
program doing N blocking 8-byte all_reduces (float32 x 2), timed in each
rank. The same file runs under plain torch (gloo) as the peer
(bench/script_round_trip.sh).

    collie run -n W -- python bench/script_all_reduce.py N

Rank 0 prints the mean wall time per op, and its own CPU time per op."""
import resource
import sys
import time

import torch
import torch.distributed as dist


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
dist.init_process_group("gloo")
t = torch.ones(2)  # 8 bytes
for _ in range(50):
    dist.all_reduce(t)
start, cpu = time.perf_counter(), cpu_seconds()
for _ in range(n):
    dist.all_reduce(t)
elapsed, cpu = time.perf_counter() - start, cpu_seconds() - cpu
if dist.get_rank() == 0:
    print("all_reduce 8 bytes, world %d: %.1f us per op, rank 0 cpu %.1f us per op (%d ops)"
          % (dist.get_world_size(), elapsed / n * 1e6, cpu / n * 1e6, n))
