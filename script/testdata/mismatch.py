"""Rank 0 calls all_reduce where rank 1 calls broadcast (deliberately wrong; collie run -n 2)."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
if dist.get_rank() == 0:
    dist.all_reduce(t)
else:
    dist.broadcast(t, src=0)
print("rank", dist.get_rank(), "has", t)
