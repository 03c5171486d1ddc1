"""Two ranks started with multiprocessing's "spawn" start method (collie run,
no -n): each sees the environment its parent set before start(), imports
this file again as __mp_main__ and draws its own random seed; then rank 1
waits in a recv that rank 0 never matches -- a deadlock, reported at the
child's own lines."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank):
    dist.init_process_group("gloo", rank=rank, world_size=2)
    print("rank %d: %s %s seed %d" % (rank, __name__, os.environ.get("SPAWNED_ENV"), torch.initial_seed()))
    dist.barrier()
    if rank == 1:
        dist.recv(torch.zeros(1), src=0)


if __name__ == "__main__":
    os.environ["SPAWNED_ENV"] = "set-before-start"
    ctx = mp.get_context("spawn")
    children = [ctx.Process(target=rank_main, args=(r,)) for r in range(2)]
    for c in children:
        c.start()
    for c in children:
        c.join()
