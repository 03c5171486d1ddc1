"""Deliberately broken torch.distributed backends: what collie's conformance
suite must catch, with a report that leads to the bug. Each wraps Gloo and
breaks one thing:

  torch:broken_sum       all_reduce of float64 with SUM adds 1 to element 0
                         of the result (a wrong value for one dtype)
  torch:hanging_reduce   reduce never returns (a hang)
  torch:reversed_gather  gather and all_gather in a subgroup deliver group
                         rank i's tensor at n-1-i (an ordering bug that only
                         groups other than the world show)
  torch:instant_barrier  barrier returns a completed Work at once, before the
                         other members entered
  torch:blocking_all_reduce  all_reduce waits for its result inside the call,
                         with the group's timeout: a call's own timeout
                         (Work.wait(timeout)) is never consulted

Load with --torch-import backends/torch/testing/broken_backends.py.
"""

import threading

import torch
import torch._C._distributed_c10d as _c10d
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


class ReversedGather(_Wrapped):
    def _subgroup(self):
        return self.size() < dist.get_world_size()

    def _reverse(self, work, lists):
        if not self._subgroup():
            return work
        work.wait()
        for outs in lists:
            copies = [t.clone() for t in outs]
            for t, c in zip(outs, reversed(copies)):
                t.copy_(c)
        return work

    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        return self._reverse(self.gloo.allgather(output_tensors, input_tensors, opts), output_tensors)

    def gather(self, output_tensors, input_tensors, opts=dist.GatherOptions()):
        return self._reverse(self.gloo.gather(output_tensors, input_tensors, opts), output_tensors)


class InstantBarrier(_Wrapped):
    def barrier(self, opts=dist.BarrierOptions()):
        done = torch.futures.Future()
        done.set_result(None)
        return _c10d._create_work_from_future(done)


class BlockingAllReduce(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        work = self.gloo.allreduce(tensors, opts)
        work.wait()  # the group's timeout, whatever the caller's
        return work


dist.Backend.register_backend("broken_sum", BrokenSum)
dist.Backend.register_backend("hanging_reduce", HangingReduce)
dist.Backend.register_backend("reversed_gather", ReversedGather)
dist.Backend.register_backend("instant_barrier", InstantBarrier)
dist.Backend.register_backend("blocking_all_reduce", BlockingAllReduce)
