"""Every op of collie's table through torch.distributed, on 4 ranks (collie run -n 4).

Each rank checks what it received against what torch promises and prints
one line per op; collie checks every op against its oracle as well.
"""
import os

import torch
import torch.distributed as dist


def check(name, got, want):
    if not torch.equal(got, want):
        raise AssertionError("%s: got %s, want %s" % (name, got, want))
    print("rank %d: %s ok" % (dist.get_rank(), name))


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "gloo", dist.get_backend()

    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    check("all_reduce", t, torch.tensor([float(world * (world + 1) // 2)]))

    t = torch.tensor([rank], dtype=torch.int64)
    dist.broadcast(t, src=2)
    check("broadcast", t, torch.tensor([2]))

    t = torch.tensor([float(rank)])
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    if rank == 1:
        check("reduce", t, torch.tensor([float(world - 1)]))

    out = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(out, torch.full((2,), float(rank)))
    check("all_gather", torch.stack(out), torch.arange(world).float().repeat_interleave(2).view(world, 2))

    flat = torch.zeros(world * 2)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    check("all_gather_into_tensor", flat, torch.arange(world).float().repeat_interleave(2))

    got = torch.zeros(1)
    dist.scatter(got, [torch.tensor([float(i * 10)]) for i in range(world)] if rank == 0 else None, src=0)
    check("scatter", got, torch.tensor([float(rank * 10)]))

    gathered = [torch.zeros(1) for _ in range(world)] if rank == 3 else None
    dist.gather(torch.tensor([float(rank)]), gathered, dst=3)
    if rank == 3:
        check("gather", torch.cat(gathered), torch.arange(world).float())

    out = torch.zeros(1)
    dist.reduce_scatter(out, [torch.tensor([float(rank * world + j)]) for j in range(world)])
    check("reduce_scatter", out, torch.tensor([float(sum(r * world + rank for r in range(world)))]))

    out = torch.zeros(1)
    dist.reduce_scatter_tensor(out, torch.arange(world).float() + rank)
    check("reduce_scatter_tensor", out, torch.tensor([float(world * rank + world * (world - 1) // 2)]))

    outs = [torch.zeros(1) for _ in range(world)]
    dist.all_to_all(outs, [torch.tensor([float(rank * 100 + j)]) for j in range(world)])
    check("all_to_all", torch.cat(outs), torch.tensor([float(r * 100 + rank) for r in range(world)]))

    out = torch.zeros(world)
    dist.all_to_all_single(out, torch.tensor([float(rank * 100 + j) for j in range(world)]))
    check("all_to_all_single", out, torch.tensor([float(r * 100 + rank) for r in range(world)]))

    dist.barrier()
    dist.monitored_barrier()
    print("rank %d: barriers ok" % rank)

    right, left = (rank + 1) % world, (rank - 1) % world
    send, recv = torch.tensor([float(rank)]), torch.zeros(1)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)])
    for r in reqs:
        r.wait()
    check("batch_isend_irecv", recv, torch.tensor([float(left)]))

    # Async collectives, and a handle polled with is_completed().
    t = torch.ones(3)
    work = dist.all_reduce(t, async_op=True)
    while not work.is_completed():
        pass
    check("all_reduce(async_op=True)", t, torch.full((3,), float(world)))

    # A group of the even ranks, blocking and any-source point-to-point on it.
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    if rank % 2 == 0:
        t = torch.tensor([1.0])
        dist.all_reduce(t, group=evens)
        check("all_reduce on a group", t, torch.tensor([float((world + 1) // 2)]))
        if rank == 0:
            got = torch.zeros(1)
            sender = dist.recv(got, group=evens)
            check("recv from any", got, torch.tensor([2.0]))
            print("rank 0: any-source recv matched rank %d" % sender)
        elif rank == 2:
            dist.send(torch.tensor([2.0]), dst=0, group=evens)
    if rank == 1:
        req = dist.irecv(torch.zeros(1), src=3, tag=7)
        req.wait()
        print("rank 1: irecv with tag ok")
    if rank == 3:
        dist.isend(torch.tensor([3.0]), dst=1, tag=7).wait()
    dist.destroy_process_group() if os.environ.get("DESTROY") else None


if __name__ == "__main__":
    main()
