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
import struct
import sys
from urllib.parse import parse_qs, urlparse

import torch

from . import request, request_binary, user_site, user_stack
from ._link import REQUEST_OP, REQUEST_WAIT

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
    # The codes of binary requests, from the controller's "ready"
    # (script_protocol.h): op name -> kind, torch dtype -> code, reduce op name -> code.
    kinds = None
    dtypes = None
    reduce_ops = None


def _learn_codes(codes):
    _state.kinds = {name: k for k, name in enumerate(codes["ops"])}
    by_name = {name: k for k, name in enumerate(codes["dtypes"])}
    _state.dtypes = {t: by_name[name] for t, name in DTYPES.items() if name in by_name}
    _state.reduce_ops = {name: k for k, name in enumerate(codes["reduce_ops"])}


_state = _State()


def forget_after_fork():
    """A forked child is not the rank its parent was."""
    _state.pending = None


# ---- tensors -------------------------------------------------------------------


def _unsupported(t):
    return CollieError("collie: tensors of dtype %s are not supported (collie takes %s)"
                       % (t.dtype, ", ".join(sorted(DTYPES.values()))))


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
        if t == "failed" and head.get("keeps_running"):
            # Work.wait(timeout) ran out: torch raises, and the op goes on.
            raise CollieError(head.get("error", "collie: the wait timed out"))
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
            ns = 0 if timeout is None or timeout.total_seconds() <= 0 else max(1, int(timeout.total_seconds() * 1e9))
            self._settle(*request_binary(REQUEST_WAIT, 2, 0, (self._op, ns), user_site(sys._getframe(1))))
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if not self._done:
            self._settle(*request_binary(REQUEST_WAIT, 3, 0, (self._op, 0), ()))
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
    """The reduce op's code (binary requests)."""
    op = opts.reduceOp
    value = int(getattr(op, "op", op))
    if value >= len(REDUCE_OPS):
        raise CollieError("collie: reduce op %s is not supported (collie takes %s)" % (op, ", ".join(REDUCE_OPS)))
    return _state.reduce_ops[REDUCE_OPS[value]]


_ASYNC, _ANY_SOURCE, _WAIT_ALL_RANKS = 1, 2, 4  # a binary op request's flags
_BUFFER = struct.Struct("<IQ")
_P2P = struct.Struct("<B3xii")
_SPLIT = struct.Struct("<Q")


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

    def _submit(self, op, buffers, frame, blocking=None, slots=(1, 0, 0), peer=-1, tag=0, reduce=0, flags=0,
                timeout_ns=0, p2p=(), splits=((), ())):
        """One op request (script_protocol.h's binary op): `op` torch's name of
        the blocking form, `slots` how many of `buffers` each slot takes (the
        batch's follow), `p2p` the batch's (send, peer, tag)."""
        if blocking is None:
            blocking = _blocking(frame)
        if not blocking:
            flags |= _ASYNC
        dtypes = _state.dtypes
        meta = []
        for t in buffers:
            code = dtypes.get(t.dtype)
            if code is None:
                raise _unsupported(t)
            meta.append(_BUFFER.pack(code, t.numel()))
        for send, peer_, tag_ in p2p:
            meta.append(_P2P.pack(send, peer_, tag_))
        for sizes in splits:
            meta.extend(_SPLIT.pack(v) for v in sizes)
        rest = (_state.kinds[op], reduce, slots[0], 0, slots[1], slots[2], self._gid, peer, tag, timeout_ns, len(p2p),
                len(splits[0]), len(splits[1]), 0)
        answer, blobs = request_binary(REQUEST_OP, 1, flags, rest, user_site(frame), b"".join(meta),
                                       [_bytes(t) for t in buffers])
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
        reduce = _reduce_op(opts) if opts is not None else _state.reduce_ops["SUM"]
        return self._submit("all_reduce", [t], sys._getframe(1), reduce=reduce)

    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        return self._submit("broadcast", [t], sys._getframe(1), peer=self._root(opts))

    def reduce(self, tensors, opts=None):
        t = _one(tensors, "reduce")
        return self._submit("reduce", [t], sys._getframe(1), peer=self._root(opts), reduce=_reduce_op(opts))

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "all_gather")
        outs = _one(output_tensors, "all_gather")
        return self._submit("all_gather", [t, *outs], sys._getframe(1), slots=(1, len(outs), 0))

    def _allgather_base(self, output, input, opts=None):
        return self._submit("all_gather_into_tensor", [input, output], sys._getframe(1), slots=(1, 0, 1))

    def gather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "gather")
        outs = output_tensors[0] if output_tensors else []
        return self._submit("gather", [t, *outs], sys._getframe(1), slots=(1, len(outs), 0), peer=self._root(opts))

    def scatter(self, output_tensors, input_tensors, opts=None):
        t = _one(output_tensors, "scatter")
        ins = input_tensors[0] if input_tensors else []
        return self._submit("scatter", [t, *ins], sys._getframe(1), slots=(1, len(ins), 0), peer=self._root(opts))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter")
        ins = _one(input_tensors, "reduce_scatter")
        return self._submit("reduce_scatter", [*ins, out], sys._getframe(1), slots=(0, len(ins), 1),
                            reduce=_reduce_op(opts))

    def _reduce_scatter_base(self, output, input, opts=None):
        return self._submit("reduce_scatter_tensor", [input, output], sys._getframe(1), slots=(1, 0, 1),
                            reduce=_reduce_op(opts))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self._submit("all_to_all", [*input_tensors, *output_tensors], sys._getframe(1),
                            slots=(0, len(input_tensors), len(output_tensors)))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        def elements(sizes, t):
            if not sizes:
                return ()
            rows = t.shape[0] if t.dim() > 0 else 1
            row = t.numel() // rows if rows else 0
            return [int(s) * row for s in sizes]

        return self._submit("all_to_all_single", [input, output], sys._getframe(1), slots=(1, 0, 1),
                            splits=(elements(input_split_sizes, input), elements(output_split_sizes, output)))

    def barrier(self, opts=None):
        return self._submit("barrier", [], sys._getframe(1), slots=(0, 0, 0))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        self._submit("monitored_barrier", [], sys._getframe(2), blocking=True, slots=(0, 0, 0),
                     flags=_WAIT_ALL_RANKS if wait_all_ranks else 0,
                     timeout_ns=int(timeout.total_seconds() * 1e9) if timeout is not None else 0).wait()

    def allreduce_coalesced(self, tensors, opts=None):
        raise CollieError("collie: all_reduce_coalesced is not one of collie's ops (core/op.h)")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise CollieError("collie: all_gather_coalesced is not one of collie's ops (core/op.h)")

    # -- point-to-point (the async forms are the blocking ones' kinds, flagged async)

    def send(self, tensors, dst, tag=0):
        return self._submit("send", [_one(tensors, "send")], sys._getframe(1), peer=self._members[dst], tag=tag)

    def recv(self, tensors, src, tag=0):
        return self._submit("recv", [_one(tensors, "recv")], sys._getframe(1), peer=self._members[src], tag=tag)

    def recv_anysource(self, tensors, tag=0):
        return self._submit("recv", [_one(tensors, "recv")], sys._getframe(1), flags=_ANY_SOURCE, tag=tag)

    def _batch(self, ops, frame):
        p2p = []
        buffers = []
        for op in ops:
            name = getattr(op.op, "__name__", "")
            p2p.append((1 if name in ("isend", "send") else 0, int(op.peer), int(op.tag)))
            buffers.append(op.tensor)
        return self._submit("batch_isend_irecv", buffers, frame, blocking=False, slots=(0, 0, 0), p2p=p2p)


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
        _learn_codes(answer["codes"])
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

    original_destroy = c10d.destroy_process_group

    def destroy_process_group(group=None):
        # A group new_group made is destroyed at the controller too (its
        # record says so); the default group ends the program's use of collie.
        gid = getattr(group, "_gid", 0) if group is not None else 0
        if gid:
            answer, _ = request({"t": "ungroup", "group": gid})
            if answer.get("t") != "ungrouped":
                raise RuntimeError(answer.get("error", "collie: destroy_process_group was refused"))
        return original_destroy(group)

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
                    ("destroy_process_group", destroy_process_group),
                    ("batch_isend_irecv", batch_isend_irecv), ("monitored_barrier", monitored_barrier)):
        f.__doc__ = getattr(c10d, name).__doc__
        setattr(c10d, name, f)
        setattr(dist, name, f)
    get_backend.__doc__ = original_get_backend.__doc__
    dist.get_backend = get_backend  # the script's view; torch's own code keeps c10d's
