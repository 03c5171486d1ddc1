"""A data-parallel training loop that hangs.

Seven batches are dealt to the ranks in turn, so with two ranks rank 0 gets
four and rank 1 three. Every step sums the gradients with all_reduce; rank 1
leaves the loop one step early and waits in the barrier, while rank 0's last
all_reduce waits for rank 1: with gloo both wait until the 30-minute
timeout. (docs/torch_programs.md walks through finding this with collie.)

    collie run -n 2 -- python examples/torch/uneven_batches.py
"""
import torch
import torch.distributed as dist

BATCHES = 7


def my_batches(rank, world):
    return [torch.full((4,), float(i)) for i in range(rank, BATCHES, world)]


def train():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    weight = torch.zeros(4)
    for step, batch in enumerate(my_batches(rank, world)):
        grad = batch - weight
        dist.all_reduce(grad)  # sum the gradients of every rank
        weight += 0.1 * grad / world
        print(f"rank {rank} step {step}: weight[0] = {weight[0]:.4f}")
    dist.barrier()  # every rank has finished training
    if rank == 0:
        print(f"saving weight {weight.tolist()}")


if __name__ == "__main__":
    train()
