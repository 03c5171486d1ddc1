"""Prints the world each rank learnt from its launcher's variables (collie run -- LAUNCHER ...)."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "local", os.environ.get("LOCAL_RANK"), "sum", t.item(),
      "local_world", os.environ.get("LOCAL_WORLD_SIZE"))
