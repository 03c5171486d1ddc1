"""Deliberately broken torch.distributed backends: what collie's conformance
suite must catch, with a report that leads to the bug. Each wraps Gloo and
breaks one thing:

  torch:broken_sum       all_reduce of float64 with SUM adds 1 to element 0
                         of the result (a wrong value for one dtype)
  torch:hanging_reduce   reduce never returns (a hang)

Load with --torch-import backends/torch/testing/broken_backends.py.
"""

import threading

import torch
import torch.distributed as dist


class _Wrapped(dist.ProcessGroup):
    """Delegates every op it does not break to a Gloo process group."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):  # noqa: N802 -- torch's name
        return type(self).__name__

    def __getattribute__(self, name):
        # Everything but what a subclass overrides goes to Gloo.
        own = type(self).__dict__.get(name) or _Wrapped.__dict__.get(name)
        if own is not None or name.startswith("_") or name in ("gloo", "rank", "size"):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "gloo"), name)


class BrokenSum(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        work = self.gloo.allreduce(tensors, opts)
        if tensors[0].dtype == torch.float64 and opts.reduceOp == dist.ReduceOp.SUM and tensors[0].numel():
            work.wait()
            tensors[0].view(-1)[0] += 1
        return work


class HangingReduce(_Wrapped):
    def reduce(self, tensors, opts=dist.ReduceOptions()):
        threading.Event().wait()  # forever


dist.Backend.register_backend("broken_sum", BrokenSum)
dist.Backend.register_backend("hanging_reduce", HangingReduce)
