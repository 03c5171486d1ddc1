"""Work.wait(timeout): a receive whose message is late times out, keeps running, and a
later wait gets the message (torch: "the op keeps running")."""
import datetime
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.zeros(3)
if rank == 0:
    req = dist.irecv(t, src=1, tag=7)
    try:
        req.wait(timeout=datetime.timedelta(milliseconds=200))
        print("rank 0: the wait returned before its message was sent")
    except RuntimeError as e:
        print("rank 0: wait(200 ms) timed out:", "did not complete within 200 ms" in str(e))
    print("rank 0: completed after the timeout:", req.is_completed())
    dist.barrier()          # only now does rank 1 send
    req.wait()
    print("rank 0: then received", t.tolist())
else:
    dist.barrier()
    dist.send(torch.tensor([1.0, 2.0, 3.0]), dst=0, tag=7)
dist.destroy_process_group()
