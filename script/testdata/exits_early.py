"""Rank 1 returns before its send: its process exits while rank 0 still waits (collie run -n 2)."""
import sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.zeros(1)
if dist.get_rank() == 1:
    sys.exit(0)
dist.recv(t, src=1)
