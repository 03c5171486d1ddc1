"""The per-op round trip between a script and the controller: N blocking
8-byte all_reduces, timed in each rank (collie run -n W -- python bench_all_reduce.py N).

Rank 0 prints the mean time per op in microseconds."""
import sys
import time

import torch
import torch.distributed as dist

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
dist.init_process_group("gloo")
t = torch.ones(2)  # 8 bytes
for _ in range(50):
    dist.all_reduce(t)
start = time.perf_counter()
for _ in range(n):
    dist.all_reduce(t)
elapsed = time.perf_counter() - start
if dist.get_rank() == 0:
    print("all_reduce 8 bytes, world %d: %.1f us per op (%d ops)" % (dist.get_world_size(), elapsed / n * 1e6, n))
