"""torch.distributed, made collie's (installed as torch.distributed is imported).

Which mechanism, and why: torch 1.13 lets Python subclass c10d's
ProcessGroup and Work (pybind trampolines) and register a creator for a
backend name (Backend.register_backend). So every process group the script
makes is a real ProcessGroup -- dist.all_reduce, dist.get_rank, group
handles, Work.wait() all run torch's own code -- whose ops are requests to
the collie controller. Three things still need the API level:

  - init_process_group and new_group are wrapped: any backend name the
    script asks for (gloo, nccl, the 2017 tutorial's tcp) becomes "collie",
    the rendezvous goes to the controller instead of a TCPStore at
    MASTER_ADDR:MASTER_PORT (so no port is bound), and the store-based
    barrier after group creation is dropped (collie's new_group is local,
    as its Dist contract says; a rank that skips it is diagnosed where the
    group is used);
  - batch_isend_irecv is one collie op (torch issues the ops one by one on
    backends that do not coalesce);
  - monitored_barrier is refused by torch for backends other than gloo, so
    it goes to the process group directly.

dist.get_backend() answers the name the script asked for.

A blocking op (dist.send, dist.all_reduce(...) without async_op) is one
round trip: the group sees from its caller's frame that torch will wait at
once, so the controller answers with the results. An async op is answered
with a handle; Work.wait() and Work.is_completed() are requests of their
own.
"""

import collections
import ctypes
import os
import sys
from urllib.parse import parse_qs, urlparse

import torch

from . import request, user_stack

BACKEND = "collie"

DTYPES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
}
# c10d's RedOpType values, in order.
REDUCE_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


class CollieError(RuntimeError):
    """An op failed on collie (torch raises RuntimeError for its backends' errors)."""


class _State:
    requested = None      # the backend name the script gave init_process_group
    pending = None        # (group id, members) for the creator, during init/new_group
    c10d = None
    c10d_file = None


_state = _State()


def forget_after_fork():
    """A forked child is not the rank its parent was."""
    _state.pending = None


# ---- tensors -------------------------------------------------------------------


def _meta(t):
    name = DTYPES.get(t.dtype)
    if name is None:
        raise CollieError("collie: tensors of dtype %s are not supported (collie takes %s)"
                          % (t.dtype, ", ".join(sorted(DTYPES.values()))))
    return {"dtype": name, "count": t.numel()}


def _flat(t):
    """Whether t's elements lie in host memory, in order, where data_ptr() says."""
    return t.is_contiguous() and not t.is_cuda and t.layout == torch.strided


def _bytes(t):
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    if _flat(t):
        return ctypes.string_at(t.data_ptr(), n)
    return t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy().tobytes()


def _write(t, blob):
    if t.numel() == 0:
        return
    if _flat(t) and len(blob) == t.numel() * t.element_size():
        ctypes.memmove(t.data_ptr(), blob, len(blob))
        return
    src = torch.frombuffer(bytearray(blob), dtype=t.dtype).view(t.shape)
    with torch.no_grad():
        t.copy_(src.to(t.device))


# ---- Work ------------------------------------------------------------------------


# Keeping Works alive. A Work that C++ receives (DDP's reducer,
# _verify_params_across_processes, ...) keeps only its C++ half: once the
# Python object is gone, C++'s wait() is torch's base wait(), which waits
# for a completion only C++ can signal -- forever. So an async Work is kept
# here until it is settled, and the last KEEP_SETTLED settled ones after
# that (C++ may still wait on them; waiting on a settled Work is a no-op).
KEEP_SETTLED = 1024
_unsettled = {}
_settled = collections.deque(maxlen=KEEP_SETTLED)


class CollieWork(torch._C._distributed_c10d.Work):
    """The handle of one op on collie."""

    def __init__(self, op_id, targets, members):
        super().__init__()
        self._op = op_id
        self._targets = targets  # the script's tensors, in the order they were sent
        self._members = members
        self._done = False
        self._error = None
        self._source = -1

    def _settle(self, head, blobs):
        t = head.get("t")
        if t in ("done", "failed") and _unsettled.pop(self._op, None) is not None:
            _settled.append(self)
        if t == "done":
            for k, blob in zip(head.get("outputs", []), blobs):
                _write(self._targets[k], blob)
            self._source = head.get("source", -1)
            self._done = True
        elif t == "failed":
            self._error = CollieError(head.get("error", "collie: the op failed"))
            self._done = True

    def wait(self, timeout=None):
        if not self._done:
            self._settle(*request({"t": "wait", "op": self._op, "where": user_stack(sys._getframe(1))}))
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if not self._done:
            self._settle(*request({"t": "test", "op": self._op}))
        return self._done

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def source_rank(self):
        if self._source < 0:
            return -1
        return self._members.index(self._source) if self._source in self._members else self._source

    def _source_rank(self):
        return self.source_rank()

    def result(self):
        return list(self._targets)

    def synchronize(self):
        pass

    def get_future(self):
        self.wait()
        fut = torch.futures.Future()
        fut.set_result(list(self._targets))
        return fut


# ---- the process group -------------------------------------------------------------


def _blocking(frame):
    """Whether torch's function that called the group waits for the Work at once."""
    code = frame.f_code
    if code.co_filename != _state.c10d_file:
        return False  # called directly: the caller keeps the Work
    name = code.co_name
    if name in ("send", "recv"):
        return True
    if name in ("isend", "irecv"):
        return False
    return frame.f_locals.get("async_op") is False


def _reduce_op(opts):
    op = opts.reduceOp
    value = int(getattr(op, "op", op))
    if value >= len(REDUCE_OPS):
        raise CollieError("collie: reduce op %s is not supported (collie takes %s)" % (op, ", ".join(REDUCE_OPS)))
    return REDUCE_OPS[value]


def _one(tensors, what):
    if len(tensors) != 1:
        raise CollieError("collie: %s takes one tensor per process, not %d" % (what, len(tensors)))
    return tensors[0]


class CollieProcessGroup(torch._C._distributed_c10d.ProcessGroup):
    """A process group whose ops run on collie (one per torch group)."""

    def __init__(self, rank, size, group_id, members):
        super().__init__(rank, size)
        self._gid = group_id
        self._members = members  # global ranks, sorted; index = group rank

    def getBackendName(self):
        return BACKEND

    def _submit(self, call, buffers, frame, blocking=None):
        if blocking is None:
            blocking = _blocking(frame)
        head = dict(call)
        head["t"] = "op"
        head["group"] = self._gid
        head.setdefault("async", not blocking)
        head["tensors"] = [_meta(t) for t in buffers]
        head["where"] = user_stack(frame)
        answer, blobs = request(head, [_bytes(t) for t in buffers])
        if answer.get("t") == "failed" and answer.get("at_issue"):
            raise CollieError(answer.get("error", "collie: the op failed"))
        work = CollieWork(answer.get("op", -1), buffers, self._members)
        if not blocking:
            _unsettled[work._op] = work
        work._settle(answer, blobs)
        return work

    def _root(self, opts):
        return self._members[opts.rootRank]

    # -- collectives

    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "all_reduce")
        reduce = _reduce_op(opts) if opts is not None else "SUM"
        return self._submit({"op": "all_reduce", "reduce_op": reduce, "layout": {"tensor": 1}}, [t],
                            sys._getframe(1))

    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        return self._submit({"op": "broadcast", "peer": self._root(opts), "layout": {"tensor": 1}}, [t],
                            sys._getframe(1))

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        return self._submit({"op": "reduce", "peer": self._root(opts), "reduce_op": _reduce_op(opts),
                             "layout": {"tensor": 1}}, [t], sys._getframe(1))

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "all_gather")
        outs = _one(output_tensors, "all_gather")
        return self._submit({"op": "all_gather", "layout": {"tensor": 1, "list": len(outs)}}, [t, *outs],
                            sys._getframe(1))

    def _allgather_base(self, output, input, opts=None):
        return self._submit({"op": "all_gather_into_tensor", "layout": {"tensor": 1, "output": 1}}, [input, output],
                            sys._getframe(1))

    def gather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        outs = output_tensors[0] if output_tensors else []
        layout = {"tensor": 1}
        if outs:
            layout["list"] = len(outs)
        return self._submit({"op": "gather", "peer": self._root(opts), "layout": layout}, [t, *outs],
                            sys._getframe(1))

    def scatter(self, output_tensors, input_tensors, opts=None):
        t = _one(output_tensors, "scatter")
        ins = input_tensors[0] if input_tensors else []
        layout = {"tensor": 1}
        if ins:
            layout["list"] = len(ins)
        return self._submit({"op": "scatter", "peer": self._root(opts), "layout": layout}, [t, *ins],
                            sys._getframe(1))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        ins = _one(input_tensors, "reduce_scatter")
        return self._submit({"op": "reduce_scatter", "reduce_op": _reduce_op(opts),
                             "layout": {"list": len(ins), "output": 1}}, [*ins, out], sys._getframe(1))

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._submit({"op": "reduce_scatter_tensor", "reduce_op": _reduce_op(opts),
                             "layout": {"tensor": 1, "output": 1}}, [input, output], sys._getframe(1))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self._submit({"op": "all_to_all", "layout": {"list": len(input_tensors), "output": len(output_tensors)}},
                            [*input_tensors, *output_tensors], sys._getframe(1))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        call = {"op": "all_to_all_single", "layout": {"tensor": 1, "output": 1}}

        def elements(sizes, t):
            rows = t.shape[0] if t.dim() > 0 else 1
            row = t.numel() // rows if rows else 0
            return [int(s) * row for s in sizes]

        if input_split_sizes:
            call["input_split_sizes"] = elements(input_split_sizes, input)
        if output_split_sizes:
            call["output_split_sizes"] = elements(output_split_sizes, output)
        return self._submit(call, [input, output], sys._getframe(1))

    def barrier(self, opts=None):
        return self._submit({"op": "barrier", "layout": {}}, [], sys._getframe(1))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        call = {"op": "monitored_barrier", "layout": {}, "wait_all_ranks": bool(wait_all_ranks)}
        if timeout is not None:
            call["timeout_ns"] = int(timeout.total_seconds() * 1e9)
        self._submit(call, [], sys._getframe(2), blocking=True).wait()

    def allreduce_coalesced(self, tensors, opts=None):
        raise CollieError("collie: all_reduce_coalesced is not one of collie's ops (core/op.h)")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise CollieError("collie: all_gather_coalesced is not one of collie's ops (core/op.h)")

    # -- point-to-point

    def send(self, tensors, dst, tag=0):
        frame = sys._getframe(1)
        blocking = _blocking(frame)
        return self._submit({"op": "send" if blocking else "isend", "peer": self._members[dst], "tag": tag,
                             "layout": {"tensor": 1}}, [_one(tensors, "send")], frame, blocking)

    def recv(self, tensors, src, tag=0):
        frame = sys._getframe(1)
        blocking = _blocking(frame)
        return self._submit({"op": "recv" if blocking else "irecv", "peer": self._members[src], "tag": tag,
                             "layout": {"tensor": 1}}, [_one(tensors, "recv")], frame, blocking)

    def recv_anysource(self, tensors, tag=0):
        frame = sys._getframe(1)
        blocking = _blocking(frame)
        return self._submit({"op": "recv" if blocking else "irecv", "any_source": True, "tag": tag,
                             "layout": {"tensor": 1}}, [_one(tensors, "recv")], frame, blocking)

    def _batch(self, ops, frame):
        p2p = []
        buffers = []
        for op in ops:
            name = getattr(op.op, "__name__", "")
            p2p.append({"send": name in ("isend", "send"), "peer": int(op.peer), "tag": int(op.tag)})
            buffers.append(op.tensor)
        return self._submit({"op": "batch_isend_irecv", "layout": {}, "p2p": p2p}, buffers, frame, blocking=False)


# ---- creation --------------------------------------------------------------------


def _create(store, rank, size, timeout):
    if _state.pending is None:
        raise CollieError("collie: a process group was created outside init_process_group/new_group")
    group_id, members = _state.pending
    _state.pending = None
    return CollieProcessGroup(rank, size, group_id, members)


def _timeout_ns(timeout, default):
    if timeout is None or timeout == default:
        return None  # torch's 30 minutes: collie diagnoses hangs instead
    return int(timeout.total_seconds() * 1e9)


def _rank_world(init_method, rank, world_size, store):
    if store is not None:
        return rank, world_size
    url = init_method or "env://"
    query = parse_qs(urlparse(url).query)
    if rank < 0 and "rank" in query:
        rank = int(query["rank"][0])
    if world_size < 0 and "world_size" in query:
        world_size = int(query["world_size"][0])
    if url.startswith("env://"):
        for name, value in (("RANK", rank), ("WORLD_SIZE", world_size)):
            if value < 0 and name not in os.environ:
                raise ValueError("Error initializing torch.distributed using env:// rendezvous: environment "
                                 "variable %s expected, but not set" % name)
        if rank < 0:
            rank = int(os.environ["RANK"])
        if world_size < 0:
            world_size = int(os.environ["WORLD_SIZE"])
    if rank < 0 or world_size < 0:
        raise ValueError("collie: init_process_group(init_method=%r) needs rank= and world_size=" % url)
    return rank, world_size


def install(dist):
    if not dist.is_available() or _state.c10d is not None:
        return
    c10d = dist.distributed_c10d
    _state.c10d = c10d
    _state.c10d_file = c10d.init_process_group.__code__.co_filename
    c10d.Backend.register_backend(BACKEND, _create)
    original_init = c10d.init_process_group
    original_new_group = c10d.new_group
    original_get_backend = c10d.get_backend
    default_timeout = c10d.default_pg_timeout

    def init_process_group(backend=None, init_method=None, timeout=default_timeout, world_size=-1, rank=-1,
                           store=None, group_name="", pg_options=None):
        if c10d.GroupMember.WORLD is not None:
            raise RuntimeError("trying to initialize the default process group twice!")
        rank, world_size = _rank_world(init_method, rank, world_size, store)
        head = {"t": "init", "rank": rank, "world": world_size, "backend": str(backend),
                "where": user_stack(sys._getframe(1))}
        ns = _timeout_ns(timeout, default_timeout)
        if ns is not None:
            head["timeout_ns"] = ns
        answer, _ = request(head)
        if answer.get("t") != "ready":
            raise RuntimeError(answer.get("error", "collie: init_process_group was refused"))
        _state.requested = str(backend).lower() if backend is not None else None
        _state.pending = (answer.get("group", 0), list(range(world_size)))
        try:
            original_init(BACKEND, store=dist.HashStore(), rank=rank, world_size=world_size, timeout=timeout,
                          group_name=group_name)
        finally:
            _state.pending = None

    def new_group(ranks=None, timeout=default_timeout, backend=None, pg_options=None):
        if c10d.GroupMember.WORLD is None:
            return original_new_group(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        members = sorted(int(r) for r in ranks) if ranks else list(range(c10d.get_world_size()))
        head = {"t": "group", "ranks": [int(r) for r in ranks] if ranks else members,
                "where": user_stack(sys._getframe(1))}
        ns = _timeout_ns(timeout, default_timeout)
        if ns is not None:
            head["timeout_ns"] = ns
        answer, _ = request(head)
        if answer.get("t") != "group_made":
            raise RuntimeError(answer.get("error", "collie: new_group was refused"))
        _state.pending = (answer["group"], members)
        try:
            return original_new_group(ranks=ranks, timeout=timeout, backend=BACKEND)
        finally:
            _state.pending = None

    def get_backend(group=None):
        name = original_get_backend(group)
        if str(name).lower() == BACKEND and _state.requested:
            return _state.requested
        return name

    def batch_isend_irecv(p2p_op_list):
        c10d._check_p2p_op_list(p2p_op_list)
        group = p2p_op_list[0].group
        if c10d._rank_not_in_group(group):
            return []
        pg = group if group is not None else c10d._get_default_group()
        work = pg._batch(p2p_op_list, sys._getframe(1))
        return [work for _ in p2p_op_list]

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        if c10d._rank_not_in_group(group):
            return
        pg = group if group is not None else c10d._get_default_group()
        pg.monitored_barrier(timeout, wait_all_ranks)

    def _store_based_barrier(rank, store, timeout):
        pass  # init_process_group met at the controller; new_group is local (see above)

    c10d._store_based_barrier = _store_based_barrier
    for name, f in (("init_process_group", init_process_group), ("new_group", new_group),
                    ("batch_isend_irecv", batch_isend_irecv), ("monitored_barrier", monitored_barrier)):
        f.__doc__ = getattr(c10d, name).__doc__
        setattr(c10d, name, f)
        setattr(dist, name, f)
    get_backend.__doc__ = original_get_backend.__doc__
    dist.get_backend = get_backend  # the script's view; torch's own code keeps c10d's
