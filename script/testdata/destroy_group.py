# A subgroup destroyed and another made of the same ranks (an elastic job's
# regrouping): the record destroys it too, and its successor is a new group.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
pair = dist.new_group([0, 1])
t = torch.ones(2) * (rank + 1)
dist.all_reduce(t, group=pair)
dist.destroy_process_group(pair)
again = dist.new_group([1, 0])
u = torch.ones(2) * (rank + 1)
dist.broadcast(u, src=1, group=again)
print("rank", rank, "sum", t.tolist(), "broadcast", u.tolist())
dist.destroy_process_group()
