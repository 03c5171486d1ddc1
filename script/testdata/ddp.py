"""DistributedDataParallel trains a model for three steps (collie run -n 2).

DDP calls the process group from C++ (parameter verification, broadcast of
the initial weights, the reducer's gradient all_reduces): the replicas must
end with the same weights, as under gloo."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())  # different initial weights: DDP broadcasts rank 0's
model = DDP(torch.nn.Linear(4, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.full((8, 4), float(dist.get_rank() + step))
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("weights", [round(v, 5) for v in model.module.weight.data.flatten().tolist()])
