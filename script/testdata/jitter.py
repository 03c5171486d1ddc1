"""Ranks that compute for a random wall time between their ops (collie run -n 3).

The wall times differ from run to run (os.urandom, not the run's seed);
on the simulator a computing rank holds the virtual clock, so every run
with the same seed prints the same lines, stamped the same, in the same
order, and ends with the same trace.
"""
import os
import random
import sys
import time

import torch
import torch.distributed as dist

wall = random.Random(os.urandom(8))


def compute():
    time.sleep(wall.random() * 0.03)


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
for step in range(3):
    compute()
    t = torch.tensor([float(rank + step)])
    dist.all_reduce(t)
    print("rank %d step %d sum %g" % (rank, step, t.item()))
    compute()
    out = torch.tensor([float(rank * 10 + step)])
    got = torch.zeros(1)
    reqs = [dist.isend(out, (rank + 1) % world), dist.irecv(got, (rank - 1) % world)]
    compute()
    for r in reqs:
        r.wait()
    print("rank %d step %d from left %g" % (rank, step, got.item()), file=sys.stderr if rank == 1 else sys.stdout)
dist.barrier()
print("rank %d done" % rank)
