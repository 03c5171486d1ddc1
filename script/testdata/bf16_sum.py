"""An all_reduce of bfloat16 values whose sum needs every bit (collie run -n 2)."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([1.0 + 2 ** -7 * (dist.get_rank() + 1)] * 4, dtype=torch.bfloat16)
dist.all_reduce(t)
print("rank", dist.get_rank(), "sum", t.tolist())
