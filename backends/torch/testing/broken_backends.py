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
  torch:int32_all_gather all_gather of int32 below 65,536 elements adds 1 to
                         the first element of the first output (one dtype of
                         one collective other than all_reduce)
  torch:late_subgroup    all_reduce on a group other than the world adds 1 to
                         element 0 from the group's 257th collective on (a
                         counter that wraps at 2^8)
  torch:scratch_input    all_gather uses its input as scratch: the input is
                         negated once the output is right (a tensor the op
                         only reads, written)
  torch:early_completion all_reduce's Work says is_completed() at once; the
                         result is copied into the tensor in wait()
  torch:default_group_off  all_reduce on the default group (the one
                         init_process_group makes) adds 1 to element 0; on
                         new_group's groups it is right

  torch:neg_inf_max      all_reduce MAX of floats: an element that is -inf on
                         every rank comes out as the dtype's lowest finite value
  torch:never_completed  all_reduce's Work says is_completed() False, even
                         after wait() returned
  torch:float32_scatter  scatter of float64 goes through float32 (exact for the
                         small integers most cases move)
  torch:self_zeros       isend and irecv to oneself complete at once, the
                         receive holding zeros (what a send to oneself
                         delivers, if it completes, is specified)
  torch:errors_as_success  recv and all_reduce that fail (a peer died: raised
                         by the call or by wait()) complete as if they had
                         succeeded, leaving their tensors as they were
  torch:barrier_says_done  barrier's Work says is_completed() True from the
                         moment it is issued; wait() still blocks until every
                         member entered (a program polling it leaves early)
  torch:chunked_list_offset  all_gather whose output list is adjacent views
                         of one storage (torch.empty(n * k).chunk(n)) gathers
                         into that storage flat, from its start instead of
                         the first view's offset
  torch:success_says_failed  async all_gather's Work says is_success() False
                         after a wait() that returned without error (a
                         program checking it thinks the op failed)
  torch:recv_ring_2048   receives from one peer go through a ring of 2,048
                         slots that is never refreshed: from the 2,049th on,
                         a receive gets the payload of the one 2,048 earlier
                         (when its shape and dtype match)
  torch:recv_timeout_ignored  a receive's Work.wait(timeout) ignores the
                         timeout and waits with the group's (a program
                         bounding a receive by its own deadline hangs)
  torch:done_only_in_wait  broadcast's Work says is_completed() False until
                         wait() is called, however long ago the op completed
                         (a program polling it before waiting spins for ever)
  torch:subgroup_world_size  a group made by new_group answers the world's
                         size and the caller's global rank from size() and
                         rank() (dist.get_world_size(group)); its ops are right
  torch:misaligned_head  all_reduce of a tensor whose data_ptr() is not
                         16-byte aligned leaves the elements before the first
                         16-byte boundary unreduced (a vector kernel without
                         its scalar head loop)
  torch:timeout_returns  a receive's Work.wait(timeout) returns False when the
                         timeout expires instead of raising (the program
                         carries on as if it had received)
  torch:success_late     async all_reduce's Work.is_success() says False until
                         wait() is called (a program that polls is_completed()
                         and then reads is_success() sees a failure)
  torch:offset0_whole_storage  all_reduce of a tensor at its storage's offset
                         0 runs on the whole storage (flat[:k] reduces its
                         neighbours too)
  torch:failed_pending   an all_gather whose wait() raised says is_completed()
                         False for ever (only the success path marks a Work
                         done: a program polling a failed op spins)
  torch:future_never_done  async all_reduce's Work.get_future() is never
                         completed (the backend never wires its completion into
                         it): a DDP communication hook chained on it never runs
  torch:poll_latest_group  all_reduce's Work.is_completed() makes progress
                         only while its group issued the process's latest op
                         (one current context): polled after an op on another
                         group, it says False until wait()
  torch:send_shared_per_peer  a send to a peer with an earlier send to it not
                         yet waited for gets that earlier send's Work: its
                         wait() returns while the later send may still read
                         its tensor
  torch:gather_by_address  all_gather into a list whose tensors tile one
                         storage lands block j in the list's j-th tensor by
                         address (right for buf.chunk(n), wrong for the same
                         views in any other order)
  torch:recycled_works   broadcast's Works come from a free list: once waited,
                         the object is handed out again, re-armed, for the
                         group's next broadcast (a kept handle reads the later
                         op's state)
  torch:future_done_only_in_wait  all_reduce's and broadcast's get_future() is
                         completed by the Work's wait(), not when the op
                         completes (a DDP communication hook, which never calls
                         wait(), waits for ever)
  torch:send_waits_in_post_order  a send's wait() first waits for every earlier
                         send of the group to that peer (one in-order queue):
                         a later send waited first deadlocks once the peer
                         takes the earlier one only after a reply
  torch:i8_sum_saturating_simd  int8/uint8 SUM of 1,024 elements or more
                         (all_reduce, reduce) saturates at the type's limits
                         instead of wrapping

Load with --torch-import backends/torch/testing/broken_backends.py.
"""

import collections
import threading

import torch
import torch._C._distributed_c10d as _c10d
import torch.distributed as dist


def _wait(work, timeout):
    """work.wait(), passing the caller's timeout on when it gave one."""
    return work.wait() if timeout is None else work.wait(timeout)


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


class _Then(_c10d.Work):
    """`inner`, then `then()` once, when the caller waits (nothing blocks in the call)."""

    def __init__(self, inner, then, says_done=False):
        super().__init__()
        self.inner, self.then, self.ran, self.says_done = inner, then, False, says_done

    def wait(self, timeout=None):
        _wait(self.inner, timeout)
        if not self.ran:
            self.ran = True
            self.then()
        return True

    def is_completed(self):
        return self.says_done or (self.inner.is_completed() and self.ran)

    def is_success(self):
        return self.inner.is_success()

    def exception(self):
        return self.inner.exception()


def _add_one(t):
    if t.numel():
        t.view(-1)[0] += 1


class Int32AllGather(_Wrapped):
    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        work = self.gloo.allgather(output_tensors, input_tensors, opts)
        t = input_tensors[0]
        if t.dtype == torch.int32 and 0 < t.numel() < 65536:
            return _Then(work, lambda: _add_one(output_tensors[0][0]))
        return work


class LateSubgroup(_Wrapped):
    def __init__(self, *a):
        super().__init__(*a)
        self._collectives = 0

    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        self._collectives += 1
        work = self.gloo.allreduce(tensors, opts)
        if self.size() < dist.get_world_size() and self._collectives > 256:
            return _Then(work, lambda: _add_one(tensors[0]))
        return work

    def __getattribute__(self, name):
        # Every collective counts, not only all_reduce.
        if name in ("broadcast", "reduce", "allgather", "gather", "scatter", "alltoall_base", "barrier"):
            object.__setattr__(self, "_collectives", object.__getattribute__(self, "_collectives") + 1)
        return _Wrapped.__getattribute__(self, name)


class ScratchInput(_Wrapped):
    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        return _Then(self.gloo.allgather(output_tensors, input_tensors, opts), lambda: input_tensors[0].neg_()
                     if input_tensors[0].is_floating_point() or input_tensors[0].dtype != torch.bool
                     else input_tensors[0].logical_not_())


class EarlyCompletion(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        scratch = tensors[0].clone()
        return _Then(self.gloo.allreduce([scratch], opts), lambda: tensors[0].copy_(scratch), says_done=True)


class DefaultGroupOff(_Wrapped):
    made = 0

    def __init__(self, *a):
        super().__init__(*a)
        self._default = DefaultGroupOff.made == 0  # init_process_group makes the first
        DefaultGroupOff.made += 1

    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        work = self.gloo.allreduce(tensors, opts)
        return _Then(work, lambda: _add_one(tensors[0])) if self._default else work


class NegInfMax(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        work = self.gloo.allreduce(tensors, opts)
        t = tensors[0]
        if opts.reduceOp != dist.ReduceOp.MAX or not t.is_floating_point():
            return work

        def lowest_for_neg_inf():
            t[t == float("-inf")] = torch.finfo(t.dtype).min
        return _Then(work, lowest_for_neg_inf)


class _NeverSaysDone(_Then):
    def is_completed(self):
        return False


class NeverCompleted(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        return _NeverSaysDone(self.gloo.allreduce(tensors, opts), lambda: None)


class BarrierSaysDone(_Wrapped):
    def barrier(self, opts=dist.BarrierOptions()):
        return _Then(self.gloo.barrier(opts), lambda: None, says_done=True)


class ChunkedListOffset(_Wrapped):
    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        outs = output_tensors[0]
        k = outs[0].numel() if outs else 0
        adjacent = len(outs) > 1 and k > 0 and all(
            t.is_contiguous() and t.storage().data_ptr() == outs[0].storage().data_ptr() and
            t.storage_offset() == outs[0].storage_offset() + i * k for i, t in enumerate(outs))
        if not adjacent:
            return self.gloo.allgather(output_tensors, input_tensors, opts)
        parts = [torch.empty_like(t) for t in outs]
        flat = torch.empty(0, dtype=outs[0].dtype).set_(outs[0].storage(), 0, (len(outs) * k,))
        return _Then(self.gloo.allgather([parts], input_tensors, opts),
                     lambda: flat.copy_(torch.cat([p.reshape(-1) for p in parts])))


class _SaysFailed(_c10d.Work):
    """`inner` as it is, but for is_success(), which says False."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def wait(self, timeout=None):
        return _wait(self.inner, timeout)

    def is_completed(self):
        return self.inner.is_completed()

    def is_success(self):
        return False


class SuccessSaysFailed(_Wrapped):
    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        return _SaysFailed(self.gloo.allgather(output_tensors, input_tensors, opts))


class RecvRing2048(_Wrapped):
    def __init__(self, *a):
        super().__init__(*a)
        self._landed = {}  # by source: the payloads received so far, the latest 2,049

    def recv(self, tensors, src, tag):
        t = tensors[0]
        ring = self._landed.setdefault(src, collections.deque())

        def land():
            ring.append(t.clone())
            if len(ring) > 2048:
                stale = ring.popleft()
                if stale.shape == t.shape and stale.dtype == t.dtype:
                    t.copy_(stale)
        return _Then(self.gloo.recv(tensors, src, tag), land)


class _NoTimeout(_c10d.Work):
    """`inner`, whose wait() never passes the caller's timeout on."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def wait(self, timeout=None):
        return self.inner.wait()

    def is_completed(self):
        return self.inner.is_completed()

    def is_success(self):
        return self.inner.is_success()

    def exception(self):
        return self.inner.exception()

    def _source_rank(self):
        return self.inner._source_rank()


class _TimeoutReturns(_NoTimeout):
    """`inner`, whose wait(timeout) returns False when it expires."""

    def wait(self, timeout=None):
        if timeout is None:
            return self.inner.wait()
        try:
            return self.inner.wait(timeout)
        except RuntimeError as e:
            if "timed out" in str(e).lower() or "timeout" in str(e).lower():
                return False
            raise


class TimeoutReturns(_Wrapped):
    def recv(self, tensors, src, tag):
        return _TimeoutReturns(self.gloo.recv(tensors, src, tag))

    def recv_anysource(self, tensors, tag):
        return _TimeoutReturns(self.gloo.recv_anysource(tensors, tag))


class _LateSuccess(_NoTimeout):
    """`inner`, whose is_success() says False until wait() was called."""

    def __init__(self, inner):
        super().__init__(inner)
        self.waited = False

    def wait(self, timeout=None):
        self.waited = True
        return _wait(self.inner, timeout)

    def is_success(self):
        return self.waited and self.inner.is_success()


class _FailedPending(_NoTimeout):
    """`inner`, whose is_completed() says False for ever once wait() raised."""

    def __init__(self, inner):
        super().__init__(inner)
        self.failed = False

    def wait(self, timeout=None):
        try:
            return _wait(self.inner, timeout)
        except RuntimeError:
            self.failed = True
            raise

    def is_completed(self):
        return not self.failed and self.inner.is_completed()


class FailedPending(_Wrapped):
    def allgather(self, outputs, inputs, opts=_c10d.AllgatherOptions()):
        return _FailedPending(self.gloo.allgather(outputs, inputs, opts))


class _NoFuture(_Then):
    """`inner`, whose get_future() is a future nobody completes."""

    def __init__(self, inner):
        super().__init__(inner, lambda: None, says_done=False)
        self.future = torch.futures.Future()

    def get_future(self):
        return self.future

    def is_completed(self):
        return self.inner.is_completed()


class FutureNeverDone(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        return _NoFuture(self.gloo.allreduce(tensors, opts))


class GatherByAddress(_Wrapped):
    def allgather(self, output_tensors, input_tensors, opts=_c10d.AllgatherOptions()):
        outs = output_tensors[0]
        one_storage = len(outs) >= 2 and all(o.is_contiguous() for o in outs) and \
            len({o.storage().data_ptr() for o in outs}) == 1
        order = sorted(range(len(outs)), key=lambda j: outs[j].data_ptr())
        if not one_storage or order == list(range(len(outs))):
            return self.gloo.allgather(output_tensors, input_tensors, opts)
        parts = [torch.empty_like(o) for o in outs]

        def land():  # the bug: block j goes to the j-th tensor in address order
            for j, at in enumerate(order):
                outs[at].copy_(parts[j])
        return _Then(self.gloo.allgather([parts], input_tensors, opts), land)


_LATEST_GROUP = [None]


class _PollLatest(_NoTimeout):
    """`inner`, which says is_completed() False before wait() while another
    group issued the process's latest op."""

    def __init__(self, inner, group):
        super().__init__(inner)
        self.group, self.waited = group, False

    def wait(self, timeout=None):
        self.waited = True
        return _wait(self.inner, timeout)

    def is_completed(self):
        if _LATEST_GROUP[0] is not self.group and not self.waited:
            return False
        return self.inner.is_completed()


class PollLatestGroup(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        _LATEST_GROUP[0] = self
        return _PollLatest(self.gloo.allreduce(tensors, opts), self)


class _SharedSend(_NoTimeout):
    """A send's Work that later sends to its peer share until it is waited for."""

    def __init__(self, inner):
        super().__init__(inner)
        self.waited = False

    def wait(self, timeout=None):
        if not self.waited:
            self.waited = True
            return _wait(self.inner, timeout)
        return True

    def is_completed(self):
        return self.waited or self.inner.is_completed()


class SendSharedPerPeer(_Wrapped):
    def send(self, tensors, dstRank, tag):  # noqa: N803 -- torch's name
        real = self.gloo.send(tensors, dstRank, tag)
        open_sends = self.__dict__.setdefault("open_sends", {})
        earlier = open_sends.get(dstRank)
        if earlier is not None and not earlier.waited:
            self.__dict__.setdefault("shadowed", []).append(real)  # kept alive; nobody waits for it
            return earlier
        w = _SharedSend(real)
        open_sends[dstRank] = w
        return w


class _Pooled(_NoTimeout):
    """`inner`, put back on `pool` once waited for, to be re-armed."""

    def __init__(self, inner, pool):
        super().__init__(inner)
        self.pool = pool

    def wait(self, timeout=None):
        r = _wait(self.inner, timeout)
        if self not in self.pool:
            self.pool.append(self)
        return r


class RecycledWorks(_Wrapped):
    def broadcast(self, tensors, opts=dist.BroadcastOptions()):
        inner = self.gloo.broadcast(tensors, opts)
        pool = self.__dict__.setdefault("pool", [])
        if pool:
            w = pool.pop()
            w.inner = inner
            return w
        return _Pooled(inner, pool)


class SuccessLate(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        return _LateSuccess(self.gloo.allreduce(tensors, opts))


class Offset0WholeStorage(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        t = tensors[0]
        if t.storage_offset() == 0 and t.is_contiguous() and t.numel() < t.storage().size():
            whole = torch.tensor([], dtype=t.dtype).set_(t.storage())
            return self.gloo.allreduce([whole], opts)
        return self.gloo.allreduce(tensors, opts)


class RecvTimeoutIgnored(_Wrapped):
    def recv(self, tensors, src, tag):
        return _NoTimeout(self.gloo.recv(tensors, src, tag))

    def recv_anysource(self, tensors, tag):
        return _NoTimeout(self.gloo.recv_anysource(tensors, tag))


class DoneOnlyInWait(_Wrapped):
    def broadcast(self, tensors, opts=dist.BroadcastOptions()):
        return _Then(self.gloo.broadcast(tensors, opts), lambda: None)


class Float32Scatter(_Wrapped):
    def scatter(self, output_tensors, input_tensors, opts=_c10d.ScatterOptions()):
        if output_tensors[0].dtype != torch.float64:
            return self.gloo.scatter(output_tensors, input_tensors, opts)
        narrowed = [[t.to(torch.float32).to(torch.float64) for t in l] for l in input_tensors]
        return self.gloo.scatter(output_tensors, narrowed, opts)


class _Swallowed(_c10d.Work):
    """`inner` (None: a call that raised), whose error wait() drops."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.waited = inner, False

    def wait(self, timeout=None):
        try:
            if self.inner is not None:
                _wait(self.inner, timeout)
        except RuntimeError:
            pass
        self.waited = True
        return True

    def is_completed(self):
        return self.waited or self.inner is None or self.inner.is_completed()

    def is_success(self):
        return True

    def exception(self):
        return None


def _done():
    f = torch.futures.Future()
    f.set_result(None)
    return _c10d._create_work_from_future(f)


class SelfZeros(_Wrapped):
    def send(self, tensors, dst, tag):
        return _done() if dst == self.rank() else self.gloo.send(tensors, dst, tag)

    def recv(self, tensors, src, tag):
        if src != self.rank():
            return self.gloo.recv(tensors, src, tag)
        tensors[0].zero_()
        return _done()


class ErrorsAsSuccess(_Wrapped):
    def recv(self, tensors, src, tag):
        try:
            return _Swallowed(self.gloo.recv(tensors, src, tag))
        except RuntimeError:
            return _Swallowed(None)

    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        try:
            return _Swallowed(self.gloo.allreduce(tensors, opts))
        except RuntimeError:
            return _Swallowed(None)


class SubgroupWorldSize(_Wrapped):
    def __init__(self, store, rank, size, timeout):
        super().__init__(store, rank, size, timeout)
        # Groups made after init_process_group: the world's numbers.
        self._world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else None

    def size(self):
        return self._world[1] if self._world else dist.ProcessGroup.size(self)

    def rank(self):
        return self._world[0] if self._world else dist.ProcessGroup.rank(self)


class MisalignedHead(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        t = tensors[0]
        off = t.data_ptr() % 16
        head = min(t.numel(), (16 - off) // t.element_size()) if off and t.is_contiguous() else 0
        keep = t.reshape(-1)[:head].clone()
        work = self.gloo.allreduce(tensors, opts)
        if head:
            work.wait()
            t.reshape(-1)[:head] = keep
        return work


class _LazyFuture(_Then):
    """`inner`, whose get_future() is completed by wait() -- and only by it."""

    def __init__(self, inner, outputs):
        super().__init__(inner, lambda: None)
        self.outputs, self.future = outputs, None

    def get_future(self):
        if self.future is None:
            self.future = torch.futures.Future()
            if self.ran:
                self.future.set_result(self.outputs)
        return self.future

    def wait(self, timeout=None):
        super().wait(timeout)
        if self.future is not None and not self.future.done():
            self.future.set_result(self.outputs)  # the bug: only here
        return True

    def is_completed(self):
        return self.inner.is_completed()


class FutureDoneOnlyInWait(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        return _LazyFuture(self.gloo.allreduce(tensors, opts), tensors)

    def broadcast(self, tensors, opts=dist.BroadcastOptions()):
        return _LazyFuture(self.gloo.broadcast(tensors, opts), tensors)


class _InOrderSend(_Then):
    """A send completed through one in-order queue of its group's sends."""

    def __init__(self, inner, queue, dst):
        super().__init__(inner, lambda: None)
        self.queue, self.dst, self.finished = queue, dst, False
        queue.append(self)

    def finish(self, timeout):
        if not self.finished:
            _wait(self.inner, timeout)
            self.finished = True
            if self in self.queue:
                self.queue.remove(self)

    def wait(self, timeout=None):
        if self in self.queue:
            for older in self.queue[:self.queue.index(self)]:
                if older.dst == self.dst:
                    older.finish(timeout)  # the bug: every earlier send to the peer first
        self.finish(timeout)
        self.ran = True
        return True

    def is_completed(self):
        return self.finished


class SendWaitsInPostOrder(_Wrapped):
    def send(self, tensors, dstRank, tag):  # noqa: N803 -- torch's name
        return _InOrderSend(self.gloo.send(tensors, dstRank, tag), self.__dict__.setdefault("sends", []), dstRank)


def _saturating_sum(t, run):
    """int8/uint8 SUM through int32, clamped to the type's range on the way back (the bug: no wrap)."""
    lo, hi = (-128, 127) if t.dtype == torch.int8 else (0, 255)
    stage = t.to(torch.int32)
    return _Then(run(stage), lambda: t.copy_(stage.clamp(lo, hi).to(t.dtype)))


def _vector_byte_sum(t, opts):
    return t.dtype in (torch.int8, torch.uint8) and opts.reduceOp == dist.ReduceOp.SUM and t.numel() >= 1024


class I8SumSaturatingSimd(_Wrapped):
    def allreduce(self, tensors, opts=dist.AllreduceOptions()):
        if _vector_byte_sum(tensors[0], opts):
            return _saturating_sum(tensors[0], lambda s: self.gloo.allreduce([s], opts))
        return self.gloo.allreduce(tensors, opts)

    def reduce(self, tensors, opts=dist.ReduceOptions()):
        t = tensors[0]
        if not _vector_byte_sum(t, opts):
            return self.gloo.reduce(tensors, opts)
        if self.rank() == opts.rootRank:
            return _saturating_sum(t, lambda s: self.gloo.reduce([s], opts))
        return self.gloo.reduce([t.to(torch.int32)], opts)


dist.Backend.register_backend("broken_sum", BrokenSum)
dist.Backend.register_backend("hanging_reduce", HangingReduce)
dist.Backend.register_backend("reversed_gather", ReversedGather)
dist.Backend.register_backend("instant_barrier", InstantBarrier)
dist.Backend.register_backend("blocking_all_reduce", BlockingAllReduce)
dist.Backend.register_backend("int32_all_gather", Int32AllGather)
dist.Backend.register_backend("late_subgroup", LateSubgroup)
dist.Backend.register_backend("scratch_input", ScratchInput)
dist.Backend.register_backend("early_completion", EarlyCompletion)
dist.Backend.register_backend("default_group_off", DefaultGroupOff)
dist.Backend.register_backend("neg_inf_max", NegInfMax)
dist.Backend.register_backend("never_completed", NeverCompleted)
dist.Backend.register_backend("float32_scatter", Float32Scatter)
dist.Backend.register_backend("errors_as_success", ErrorsAsSuccess)
dist.Backend.register_backend("self_zeros", SelfZeros)
dist.Backend.register_backend("barrier_says_done", BarrierSaysDone)
dist.Backend.register_backend("done_only_in_wait", DoneOnlyInWait)
dist.Backend.register_backend("chunked_list_offset", ChunkedListOffset)
dist.Backend.register_backend("success_says_failed", SuccessSaysFailed)
dist.Backend.register_backend("recv_ring_2048", RecvRing2048)
dist.Backend.register_backend("recv_timeout_ignored", RecvTimeoutIgnored)
dist.Backend.register_backend("subgroup_world_size", SubgroupWorldSize)
dist.Backend.register_backend("misaligned_head", MisalignedHead)
dist.Backend.register_backend("timeout_returns", TimeoutReturns)
dist.Backend.register_backend("success_late", SuccessLate)
dist.Backend.register_backend("offset0_whole_storage", Offset0WholeStorage)
dist.Backend.register_backend("failed_pending", FailedPending)
dist.Backend.register_backend("recycled_works", RecycledWorks)
dist.Backend.register_backend("future_never_done", FutureNeverDone)
dist.Backend.register_backend("poll_latest_group", PollLatestGroup)
dist.Backend.register_backend("send_shared_per_peer", SendSharedPerPeer)
dist.Backend.register_backend("gather_by_address", GatherByAddress)
dist.Backend.register_backend("future_done_only_in_wait", FutureDoneOnlyInWait)
dist.Backend.register_backend("send_waits_in_post_order", SendWaitsInPostOrder)
dist.Backend.register_backend("i8_sum_saturating_simd", I8SumSaturatingSimd)
