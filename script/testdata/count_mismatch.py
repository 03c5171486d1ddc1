"""Rank 1 passes all_reduce one element fewer than rank 0 (deliberately wrong; collie run -n 2)."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4 - dist.get_rank())
dist.all_reduce(t)
print("rank", dist.get_rank(), "sum", t.tolist())
