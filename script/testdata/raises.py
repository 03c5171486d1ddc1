"""Rank 1 raises before it sends; rank 0 waits for it (collie run -n 2)."""
import torch
import torch.distributed as dist


def step(rank):
    t = torch.zeros(1)
    if rank == 0:
        dist.recv(t, src=1)
    else:
        scale = 0
        t += 1 / scale
        dist.send(t, dst=0)


dist.init_process_group("gloo")
step(dist.get_rank())
