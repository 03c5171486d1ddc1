"""Each rank declares a different world size (collie run -n 2)."""
import os
import torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", rank=rank, world_size=2 + rank)
