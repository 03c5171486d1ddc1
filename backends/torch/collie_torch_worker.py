#!/usr/bin/env python3
"""One rank of a collie process job over torch.distributed.

collie (the controller) starts one of these per rank and runs every rank's
program itself; this process executes its rank's ops with torch.distributed
exactly as a torch program would -- init_process_group with env://
rendezvous, new_group, send/recv, isend/irecv and Work.wait(), collectives
with and without async_op=True -- and returns every op's outputs and errors.
The protocol is backends/remote/op_protocol.h.

Environment (set by collie):
  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT   torch's env:// rendezvous
  COLLIE_STORE_PORT_FILE  where set, MASTER_PORT is not used: rank 0's store
                         listens on a port the kernel picks and writes it to this
                         file, where the other ranks read it (start_store)
  COLLIE_TORCH_BACKEND   the backend name given to init_process_group (gloo, mpi, nccl, a plugin's)
  COLLIE_TORCH_IMPORT    modules (or .py files) to import first, comma-separated (a plugin backend
                         registers itself when imported)
  COLLIE_CONTROLLER      host:port of the controller
  COLLIE_JOB_TOKEN       the job's token (proven by HMAC, never sent)
  COLLIE_TIMEOUT_NS      the process groups' timeout in nanoseconds (default 1800 s, torch's)
  COLLIE_START_TIMEOUT_MS  how long the ranks wait for each other to start (default 300 s)

Exit codes: 0 after the controller said end; 1 the controller went away or
broke the protocol; 3 the job cannot start here (an unknown backend, an
import that fails), with one line on stderr saying why.
"""

import collections
import datetime
import faulthandler
import hashlib
import hmac
import importlib
import importlib.util
import json
import os
import re
import socket
import struct
import sys
import time

USAGE_EXIT = 3


def fail_start(message):
    sys.stderr.write("collie torch worker: " + message + "\n")
    sys.stderr.flush()
    sys.exit(USAGE_EXIT)


try:
    import torch
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001 -- any import failure means the same thing
    fail_start("cannot import torch.distributed with %s: %s: %s" % (sys.executable, type(e).__name__, e))

DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}
ELEMENT_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1,
                "int32": 4, "int64": 8, "bool": 1}

# torch's default process-group timeout (30 min), in ns: COLLIE_TIMEOUT_NS when unset.
DEFAULT_TIMEOUT_NS = 1800 * 10**9

# An error raised at the call whose message says the library lacks the op,
# dtype or reduce op: the case is skipped with that reason, never passed.
UNSUPPORTED = re.compile(r"not supported|unsupported|no support|does not support|cannot use reduceop|"
                         r"not implemented|notimplemented|only implemented for|invalid scalar type|"
                         # NCCL refuses two ranks on one GPU: a world larger than the GPUs present
                         r"duplicate GPU detected", re.IGNORECASE)

# Where a rank's tensors live: None (the host) unless the backend needs
# device tensors (nccl, or COLLIE_TORCH_DEVICE=cuda): then cuda:LOCAL_RANK,
# and outputs are copied back to the host for the controller's checks.
DEVICE = None


def device_for(backend):
    want = os.environ.get("COLLIE_TORCH_DEVICE") or ("cuda" if backend == "nccl" else "cpu")
    if want == "cpu":
        return None
    if not torch.cuda.is_available():
        fail_start("torch.distributed's '%s' backend needs CUDA tensors and torch sees no CUDA device here" % backend)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    return torch.device("cuda", local % torch.cuda.device_count())


def synchronize():
    """Waits for the rank's device work (wall-clock timing of asynchronous NCCL calls)."""
    if DEVICE is not None:
        torch.cuda.synchronize(DEVICE)


def reduce_op(name):
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
           "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
           "BXOR": dist.ReduceOp.BXOR}
    if name == "AVG":
        if not hasattr(dist.ReduceOp, "AVG"):
            raise NotImplementedError("ReduceOp.AVG is not supported by this torch")
        return dist.ReduceOp.AVG
    return ops[name]


# A tensor's bytes as integers of its element's width, to compare bits.
BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
GUARD_BYTES = 64
_PATTERNS = {}


def guard_pattern(bits, n, device):
    """n elements of the guard pattern (a value that depends on the place),
    as integers of type `bits`: one long pattern per type, sliced."""
    key = (bits, device)
    p = _PATTERNS.get(key)
    if p is None or p.numel() < n:
        p = ((torch.arange(max(n, 1 << 16), dtype=torch.int64) * 29 + 0x35) & 0x7F).to(bits)
        p = p if device is None else p.to(device)
        _PATTERNS[key] = p
    return p[:n]


def poison(t):
    """Overwrites a tensor a completed op only read (a send's, a
    collective's input): the program may reuse it once wait() returned, so a
    library that reads it later delivers this pattern, which the receiver's
    check sees."""
    n = t.numel()
    if n:
        p = (torch.arange(n, dtype=torch.int64) * 7 + 0x4B) % 127 + 1
        t.copy_(p.to(t.dtype).to(t.device).reshape(t.shape))


class WorkerCheck(RuntimeError):
    """What the worker itself saw the library do wrong to an op it said had
    succeeded (a Work that said done early, memory written around a tensor,
    is_success() False after a clean wait()). Sent as kind "check": the
    controller never takes it for an error a scenario expects."""


class Buffer:
    """A program's tensor as the library gets it: shaped as its "shape" (1-D
    without one, [] for a 0-d scalar), a view into a larger storage -- as a
    tensor cut from a bucket or a batch is -- at an offset, and for a run
    that asks for non-contiguous views (`views`) each row inside a row twice
    as wide: every other element of it ("strided", wide[..., ::2]) or its
    first half ("pitched", wide[..., :k]: the last stride is 1, yet the
    tensor is not contiguous). The storage's other elements (a guard before
    the tensor and one after it, and the rest of each wide row) hold a
    pattern, and the view's place (data pointer, shape, strides,
    offset) is recorded: an op may change neither (damage()). `skew`
    elements more of guard before the tensor move its data_ptr() off the
    guard's 64-byte alignment (a slice such as flat[3:] has any element
    alignment; a library that assumed 16 or 64 bytes passed while every
    operand was 64-byte aligned); skew 0 puts the tensor at the storage's
    start, with no guard before it."""

    def __init__(self, spec, blob, views=None, skew=0):
        dtype = DTYPES[spec["dtype"]]
        shape = list(spec["shape"]) if "shape" in spec else [spec["count"]]  # [] is a 0-d tensor
        n = spec["count"]
        wide = views in ("strided", "pitched") and bool(shape)
        flat = torch.empty(0, dtype=dtype) if n == 0 else torch.frombuffer(bytearray(blob), dtype=dtype)
        size = torch.empty(0, dtype=dtype).element_size()
        guard = max(1, GUARD_BYTES // size)
        first = guard + skew if skew else 0  # skew 0: at the storage's start, as a fresh tensor or flat[:k]
        inner = 2 * n if wide else n
        store = torch.empty(first + inner + guard, dtype=dtype, device=DEVICE)
        self.bits = store.view(BITS[size])
        self.pattern = guard_pattern(BITS[size], store.numel(), DEVICE)
        self.bits.copy_(self.pattern)
        self.first, self.end = first, first + inner  # the tensor's span of the storage
        if wide:
            rows = shape[:-1] + [2 * shape[-1]]
            own, rest = ((slice(None, None, 2), slice(1, None, 2)) if views == "strided"
                         else (slice(None, shape[-1]), slice(shape[-1], None)))
            self.tensor = store[first:first + inner].view(rows)[..., own]
            self.gaps = self.bits[first:first + inner].view(rows)[..., rest]
            self.gaps_pattern = self.pattern[first:first + inner].view(rows)[..., rest]
        else:
            self.tensor = store[first:first + n].view(shape)
            self.gaps = None
        self.tensor.copy_(flat.reshape(shape))
        self.place = self.where()

    @classmethod
    def chunks(cls, specs, blobs, rotated=False):
        """A list operand's tensors as adjacent views of one storage, as
        `torch.empty(n * k).chunk(n)` or a flat bucket's `split()` makes them
        (a library that flattens such a list by its storage, and misplaces
        it, is seen), guarded before the first and after the last.
        `rotated`: entry j is the storage's chunk j + 1 (entry n - 1 its
        first), as a ring's rotated list of one bucket's chunks is -- the
        list's order is not its tensors' address order."""
        dtype = DTYPES[specs[0]["dtype"]]
        counts = [spec["count"] for spec in specs]
        size = torch.empty(0, dtype=dtype).element_size()
        guard = max(1, GUARD_BYTES // size)
        store = torch.empty(guard + sum(counts) + guard, dtype=dtype, device=DEVICE)
        bits = store.view(BITS[size])
        pattern = guard_pattern(BITS[size], store.numel(), DEVICE)
        bits.copy_(pattern)
        in_storage = list(range(len(specs)))  # entries in storage order
        if rotated:
            in_storage = in_storage[1:] + in_storage[:1]
        starts, at = [0] * len(specs), guard
        for j in in_storage:
            starts[j] = at
            at += counts[j]
        parts = []
        for spec, blob, n, at in zip(specs, blobs, counts, starts):
            shape = list(spec["shape"]) if "shape" in spec else [n]
            b = cls.__new__(cls)
            b.bits, b.pattern, b.gaps = bits, pattern, None
            b.first, b.end = guard, guard + sum(counts)  # the list's span: its parts are one another's neighbours
            b.tensor = store[at:at + n].view(shape)
            if n:
                b.tensor.copy_(torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape))
            b.place = b.where()
            parts.append(b)
        return parts

    def where(self):
        t = self.tensor
        return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset())

    def damage(self):
        """What the op did to the storage around the tensor, or to the
        tensor's place (a sentence), or None."""
        now = self.where()
        if now != self.place:
            (p0, s0, st0, o0), (p1, s1, st1, o1) = self.place, now
            if (p0, o0) != (p1, o1):
                return ("moved the tensor to other memory (its data_ptr() was %#x at offset %d, is %#x at offset %d): "
                        "the program's storage never sees the result" % (p0, o0, p1, o1))
            return ("changed the tensor's shape or strides from %s / %s to %s / %s: an op writes into the tensor it is "
                    "given, as it is" % (list(s0), list(st0), list(s1), list(st1)))
        before, after = self.bits[:self.first], self.bits[self.end:]
        if not torch.equal(before, self.pattern[:self.first]):
            at = int((before != self.pattern[:self.first]).nonzero()[0][0])
            where = "%d elements before its first" % (self.first - at)
        elif not torch.equal(after, self.pattern[self.end:]):
            at = int((after != self.pattern[self.end:]).nonzero()[0][0])
            where = "%d elements past its last" % (at + 1)
        elif self.gaps is not None and not torch.equal(self.gaps, self.gaps_pattern):
            where = "beside its elements (the rest of the wider rows it is a view of)"
        else:
            return None
        return "wrote into memory around the tensor that is not its own: an element %s changed" % where


def rows(splits, t):
    """collie's split sizes count elements; torch's count rows of dim 0."""
    if splits is None or t.dim() < 2:
        return splits
    row = t[0].numel() if t.shape[0] else 0
    if row == 0 or any(s % row for s in splits):
        raise ValueError("split sizes %s are not whole rows of %d elements of a tensor of shape %s"
                         % (splits, row, list(t.shape)))
    return [s // row for s in splits]


def to_bytes(t):
    t = t.detach().cpu().contiguous().reshape(-1)  # a 0-d tensor has no byte view of its own
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def global_rank(group, rank_in_group):
    for name in ("get_global_rank", "_get_global_rank"):
        f = getattr(dist.distributed_c10d, name, None)
        if f is not None:
            return f(group, rank_in_group)
    return rank_in_group


class Link:
    """The connection to the controller: length-prefixed JSON plus blobs."""

    def __init__(self, address):
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise EOFError("the controller closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read(self):
        (n,) = struct.unpack("<I", self._read(4))
        head = json.loads(self._read(n).decode("utf-8"))
        blobs = [self._read(size) for size in head.get("blobs", [])]
        return head, blobs

    def write(self, head, blobs=()):
        blobs = list(blobs)
        if blobs:
            head = dict(head, blobs=[len(b) for b in blobs])
        text = json.dumps(head, ensure_ascii=True).encode("utf-8")
        self.sock.sendall(b"".join([struct.pack("<I", len(text)), text] + blobs))


# ---- the library mapping: one entry per op of collie's table (core/op.h) ----
# Each takes the decoded call (Worker.issue) and returns (work or None, the
# source of a blocking receive). async forms return the Work to wait on.

def timeout_of(ns):
    """A timeout of `ns` > 0 nanoseconds as torch takes it: whole milliseconds,
    rounded up (Gloo counts milliseconds, and a timedelta of less than one
    microsecond is 0 -- "no timeout" -- so a 1 ns deadline waited for ever)."""
    return datetime.timedelta(milliseconds=max(1, -(-int(ns) // 1000000)))


def _any_source(group, work):
    src = work._source_rank()
    return global_rank(group, src) if group is not dist.GroupMember.WORLD else src


# A blocking send or receive given its own timeout is issued as isend/irecv:
# torch bounds only Work.wait(timeout) (complete() waits so).
def _send(w, group, t, peer, tag, asy, **_):
    if asy:
        return dist.isend(t, peer, group=group, tag=tag), peer
    dist.send(t, peer, group=group, tag=tag)
    return None, peer


def _recv(w, group, t, peer, tag, asy, **_):
    if asy:
        return dist.irecv(t, src=peer, group=group, tag=tag), peer
    return None, dist.recv(t, src=peer, group=group, tag=tag)


def _monitored_barrier(w, group, head, **_):
    kwargs = {"wait_all_ranks": bool(head.get("wait_all_ranks"))}
    if head.get("timeout_ns"):
        kwargs["timeout"] = timeout_of(head["timeout_ns"])
    dist.monitored_barrier(group=group, **kwargs)
    return None, None


def _batch_isend_irecv(w, group, p2p, **_):
    ops = [dist.P2POp(dist.isend if send else dist.irecv, t, peer, group=group, tag=tag) for send, t, peer, tag in p2p]
    return dist.batch_isend_irecv(ops), None


def _tensor_form(name, old):
    f = getattr(dist, name, None) or getattr(dist, old)
    return f


# The point-to-point ops (batch_isend_irecv's Works come as a list).
P2P_OPS = ("send", "isend", "recv", "irecv")

LIBRARY_CALLS = {
    "send": _send,
    "isend": lambda w, group, t, peer, tag, **_: (dist.isend(t, peer, group=group, tag=tag), peer),
    "recv": _recv,
    "irecv": lambda w, group, t, peer, tag, **_: (dist.irecv(t, src=peer, group=group, tag=tag), peer),
    "broadcast": lambda w, group, t, peer, asy, **_: (dist.broadcast(t, peer, group=group, async_op=asy), None),
    "reduce": lambda w, group, t, peer, rop, asy, **_: (dist.reduce(t, peer, op=rop, group=group, async_op=asy), None),
    "all_reduce": lambda w, group, t, rop, asy, **_: (dist.all_reduce(t, op=rop, group=group, async_op=asy), None),
    "scatter": lambda w, group, t, lst, peer, asy, **_: (
        dist.scatter(t, scatter_list=lst if w.rank == peer else None, src=peer, group=group, async_op=asy), None),
    "gather": lambda w, group, t, lst, peer, asy, **_: (
        dist.gather(t, gather_list=lst if w.rank == peer else None, dst=peer, group=group, async_op=asy), None),
    "all_gather": lambda w, group, t, lst, asy, **_: (dist.all_gather(lst, t, group=group, async_op=asy), None),
    "all_gather_into_tensor": lambda w, group, t, out, asy, **_: (
        _tensor_form("all_gather_into_tensor", "_all_gather_base")(out, t, group=group, async_op=asy), None),
    "reduce_scatter": lambda w, group, out, lst, rop, asy, **_: (
        dist.reduce_scatter(out, lst, op=rop, group=group, async_op=asy), None),
    "reduce_scatter_tensor": lambda w, group, t, out, rop, asy, **_: (
        _tensor_form("reduce_scatter_tensor", "_reduce_scatter_base")(out, t, op=rop, group=group, async_op=asy), None),
    "all_to_all": lambda w, group, lst, out_list, asy, **_: (
        dist.all_to_all(out_list, lst, group=group, async_op=asy), None),
    "all_to_all_single": lambda w, group, t, out, head, asy, **_: (
        dist.all_to_all_single(out, t, output_split_sizes=rows(head.get("output_split_sizes"), out),
                               input_split_sizes=rows(head.get("input_split_sizes"), t), group=group,
                               async_op=asy), None),
    "barrier": lambda w, group, asy, **_: (dist.barrier(group=group, async_op=asy), None),
    "monitored_barrier": _monitored_barrier,
    "batch_isend_irecv": _batch_isend_irecv,
}


class Worker:
    def __init__(self, link, rank, world, init_timeout_ns=None):
        self.link = link
        self.init_timeout_ns = init_timeout_ns  # init_process_group's timeout: group 0 is then the default group
        self.rank = rank
        self.world = world
        self.groups = {}   # the run's group ids -> torch groups
        self.group_errors = {}
        self.destroy_error = None  # a destroy_group the library refused, for the run's next op to report
        self.handles = {}  # async op id -> (op, work, tensors, peer, group)
        self.views = None  # the run hands the library non-contiguous views: "strided" or "pitched"
        self.answered = set()  # async ops that failed when issued (a wait for one is answered)
        self.world_timeout_ns = None  # the timeout group 0 was made with
        self.kept, self.kept_bytes = collections.deque(), 0  # completed ops' tensors: (op, id, operand, tensor, its bytes then)
        self.done_works = collections.deque(maxlen=self.KEPT_WORKS)  # completed ops' Works: (op, id, work)

    # ---- groups -----------------------------------------------------------
    def begin_run(self, timeout_ns):
        """Drops the last run's groups and handles; group 0, the run's world,
        is the last run's when its timeout is the same. A run follows only one
        that left the job clean (every op of every rank completed: nothing of
        it is in flight; op_protocol.h), and a new Gloo group costs tens of ms
        per rank (a store barrier, a full mesh of connections)."""
        keep = 0 in self.groups and 0 not in self.group_errors and self.world_timeout_ns == timeout_ns
        for gid, g in self.groups.items():
            if (keep and gid == 0) or g is None or g is dist.GroupMember.NON_GROUP_MEMBER \
                    or g is dist.GroupMember.WORLD:
                continue
            try:
                dist.destroy_process_group(g)
            except Exception:  # noqa: BLE001 -- a group already gone is fine
                pass
        self.groups = {0: self.groups[0]} if keep else {}
        self.group_errors = {}
        self.destroy_error = None
        self.handles = {}
        self.answered = set()
        self.kept, self.kept_bytes = collections.deque(), 0
        self.done_works.clear()
        if not keep:
            self.world_timeout_ns = timeout_ns
            if self.init_timeout_ns is not None and (timeout_ns or DEFAULT_TIMEOUT_NS) == self.init_timeout_ns:
                # The default group, as a program's plain dist.all_reduce(t)
                # uses it: a backend may build it apart from new_group's.
                self.groups[0] = dist.GroupMember.WORLD
            else:
                self.make_group(0, list(range(self.world)), timeout_ns)

    def make_group(self, gid, ranks, timeout_ns):
        kwargs = {}
        if timeout_ns:
            kwargs["timeout"] = timeout_of(timeout_ns)
        try:
            self.groups[gid] = dist.new_group(ranks=ranks, **kwargs)
        except Exception as e:  # noqa: BLE001
            self.group_errors[gid] = "could not be created: %s: %s" % (type(e).__name__, e)
            return
        # A member's group answers its own size and this rank's place in it
        # (torch numbers a group's ranks in sorted order): programs size
        # their lists and pick roots by them (a backend whose subgroup
        # answered the world's size and rank passed: the worker never asked).
        me = dist.get_rank()
        if me in ranks:
            size, rank = dist.get_world_size(self.groups[gid]), dist.get_rank(self.groups[gid])
            want_size, want_rank = len(ranks), sorted(ranks).index(me)
            if (size, rank) != (want_size, want_rank):
                self.group_errors[gid] = (
                    "is wrong: dist.get_world_size(group) is %d and dist.get_rank(group) %d on global rank %d of "
                    "the group of ranks %s, which has %d members and numbers this rank %d (its ranks in sorted "
                    "order)" % (size, rank, me, sorted(ranks), want_size, want_rank))

    def destroy_group(self, gid):
        """dist.destroy_process_group(group) of a group every op of which this
        rank waited for. The id is never used again: its entry goes, and the
        library's error, if it raises one, fails the run's next op (the
        message has no answer)."""
        g = self.groups.pop(gid, None)
        if self.group_errors.pop(gid, None) is not None or g is None \
                or g is dist.GroupMember.NON_GROUP_MEMBER or g is dist.GroupMember.WORLD:
            return
        try:
            dist.destroy_process_group(g)
        except Exception as e:  # noqa: BLE001 -- reported by the next op
            self.destroy_error = "destroy_process_group(group %d): %s: %s" % (gid, type(e).__name__, e)

    # ---- ops --------------------------------------------------------------
    @staticmethod
    def decode(head, tensors):
        """The call's arguments from its message (backends/remote/call_codec.h):
        the slots' tensors by the layout, then batch_isend_irecv's ops."""
        args = {}
        at = 0
        for slot in ("tensor", "list", "output"):
            n = head.get("layout", {}).get(slot)
            if n is None:
                continue
            args[slot] = tensors[at:at + n]
            at += n
        args["p2p"] = []
        for op in head.get("p2p", []):
            args["p2p"].append((op["send"], tensors[at], op["peer"], op.get("tag", 0)))
            at += 1
        return args

    def issue(self, head, tensors):
        """Calls the op with torch.distributed: returns (work or None, the source of a blocking receive)."""
        gid = head.get("group", 0)
        if self.destroy_error is not None:
            text, self.destroy_error = self.destroy_error, None
            raise RuntimeError(text)
        if gid in self.group_errors:
            text = "its group " + self.group_errors[gid]
            raise WorkerCheck(text) if text.startswith("its group is wrong") else RuntimeError(text)
        group = self.groups[gid]
        a = self.decode(head, tensors)
        one = {k: v[0] for k, v in a.items() if k in ("tensor", "output") and v}
        lst = a.get("list")
        out_list = a.get("output") if head["op"] == "all_to_all" else None
        peer = None if head.get("any_source") else head.get("peer", -1)
        tag = head.get("tag", 0)
        rop = reduce_op(head["reduce_op"]) if "reduce_op" in head else None
        # A call's own timeout (timeout_ns) is honoured as torch offers it:
        # the op is issued asynchronously and Work.wait(timeout) bounds the
        # wait (complete()).
        asy = head.get("async", False) or bool(head.get("timeout_ns"))
        op = head["op"]
        if op not in LIBRARY_CALLS:
            raise ValueError("unknown op " + op)
        return LIBRARY_CALLS[op](self, group=group, t=one.get("tensor"), out=one.get("output"), lst=lst,
                                 out_list=out_list, peer=peer, tag=tag, rop=rop, asy=asy, head=head, p2p=a["p2p"])

    def reply_error(self, op_id, e):
        text = "%s: %s" % (type(e).__name__, e)
        kind = "unsupported" if UNSUPPORTED.search(text) else "library"
        if isinstance(e, WorkerCheck):
            kind, text = "check", str(e)
        if self.views and "contiguous" in text.lower():
            # A refusal in words, not a wrong answer: the case is skipped with them.
            kind, text = "unsupported", "the library refuses non-contiguous tensors: " + text
        self.link.write({"t": "failed", "id": op_id, "kind": kind, "error": text})

    # What the library does to a program's tensors where only torch's
    # semantics can tell: the tensors an op only reads (a send's, a
    # collective's inputs, every tensor of a rank outside the group) must be
    # as the program wrote them when the op completes, and no tensor of a
    # completed op may change while later ops run. The controller sees only
    # the outputs each op hands back, so these are checked here.
    KEPT_TENSORS = 64            # the latest completed ops' tensors, re-read as each later op completes
    KEPT_BYTES = 8 << 20
    KEPT_WORKS = 8               # the latest completed ops' Works, asked again as each later op is issued

    def check_done_works(self, work):
        """What a library did wrong to the Works of completed ops as a later
        op (its Work `work`) was issued, or None: a Work that completed
        stays completed (a program may poll a kept handle), and a new op
        gets a Work of its own (a library that recycles a pool of Works
        passed while each was asked once)."""
        for kop, kid, w in self.done_works:
            if w is work:
                return ("the Work of a completed %s (op id %d) came back as the Work of a later op: each op "
                        "gets a Work of its own" % (kop, kid))
            if not w.is_completed():
                return ("the Work of a completed %s (op id %d) said is_completed() False after a later op was "
                        "issued: a Work that completed stays completed" % (kop, kid))
        return None

    def check_untouched(self, op, now, blobs, outs):
        """What changed that may not have (a sentence), or None. `now`: each tensor's bytes at completion."""
        writes = set(outs)
        for k, b in enumerate(now):
            if k not in writes and k < len(blobs) and b != bytes(blobs[k]):
                return ("%s changed its operand %d, which it only reads (a send's tensor, a collective's input, or "
                        "a tensor of a rank outside the group): the library wrote into the program's tensor" % (op, k))
        for (kop, kid, k, t, b) in self.kept:
            if to_bytes(t) != b:
                return ("a tensor of a completed %s (its operand %d, op id %d) changed after that op had completed, "
                        "while later ops ran: the library wrote into the program's tensor late" % (kop, k, kid))
        return None

    def keep_completed(self, op, op_id, tensors, now):
        for k, (t, b) in enumerate(zip(tensors, now)):
            if len(b) > self.KEPT_BYTES:
                continue
            self.kept.append((op, op_id, k, t, b))
            self.kept_bytes += len(b)
        while self.kept and (len(self.kept) > self.KEPT_TENSORS or self.kept_bytes > self.KEPT_BYTES):
            self.kept_bytes -= len(self.kept.popleft()[4])

    @staticmethod
    def future_of(head, work):
        """An async collective's Work.get_future() (taken before wait(), as
        a DDP communication hook takes it), or None: p2p Works, and Works
        that have no future (a Python Work's get_future() raises)."""
        if not head.get("async", False) or head["op"] in P2P_OPS:
            return None
        try:
            return work.get_future()
        except Exception:  # noqa: BLE001 -- no future: nothing to check
            return None

    @staticmethod
    def future_done(future):
        """Whether `future` says done() within 1 s (a library may complete
        it from its own thread just after wait() returned)."""
        give_up = time.monotonic_ns() + 1_000_000_000
        while not future.done():
            if time.monotonic_ns() >= give_up:
                return False
            time.sleep(0.0002)
        return True

    @staticmethod
    def future_holds(future, tensor):
        """Whether a done future's value() is torch's: a list whose first
        tensor holds the op's output (all_reduce, broadcast)."""
        try:
            v = future.value()
        except Exception:  # noqa: BLE001 -- a future done with an error: wait() said otherwise
            return False
        if not (isinstance(v, (list, tuple)) and len(v) > 0 and isinstance(v[0], torch.Tensor)):
            return False
        if v[0].data_ptr() == tensor.data_ptr() and v[0].shape == tensor.shape and v[0].dtype == tensor.dtype \
                and v[0].stride() == tensor.stride():
            return True  # the op's own tensor (torch's futures hold it): nothing to read
        return to_bytes(v[0]) == to_bytes(tensor)

    @staticmethod
    def completes_when_polled(work, poll_ns):
        """Polls `work.is_completed()` for up to poll_ns without waiting, as a
        program spinning on it does: True once it said so."""
        give_up = time.monotonic_ns() + poll_ns
        while not work.is_completed():
            if time.monotonic_ns() >= give_up:
                return False
            time.sleep(0.0002)  # the library's threads (and other ranks) run meanwhile
        return True

    @staticmethod
    def wait_again(work, tensors, outs):
        """A second wait() on a completed Work, after the program wrote to
        the op's outputs: it must leave them alone (a backend that landed its
        result again in every wait() passed while each Work was waited for
        once). The outputs are given back as they were. Returns what went
        wrong, or None."""
        saved = [tensors[k].clone() for k in outs]
        try:
            for k in outs:
                tensors[k].fill_(7)
            pattern = [to_bytes(tensors[k]) for k in outs]
            try:
                work.wait()
            except Exception as e:  # noqa: BLE001 -- reported with the library's words
                return "a second Work.wait() on a completed op raised: %s" % e
            if [to_bytes(tensors[k]) for k in outs] != pattern:
                return ("a second Work.wait() on a completed op changed its outputs, which the program had written "
                        "to since: wait() on a completed Work must leave them alone")
            return None
        finally:
            for k, t in zip(outs, saved):
                tensors[k].copy_(t)

    def complete(self, op_id, head, work, buffers, source, group, blobs):
        op = head["op"]
        tensors = [b.tensor for b in buffers]
        writes = [k for k in head.get("writes", []) if k < len(tensors)]
        said_done_with = None  # the outputs when the Work said is_completed() before wait()
        future = None  # an async collective's Work.get_future(), taken before wait()
        failed_when_done = False  # is_success() False then
        not_polled_done = False  # polled (head's poll_ns) and never said is_completed() before wait()
        future_late = False  # is_completed() said True before wait(), and the future was not done() then
        try:
            if work is not None:
                if isinstance(work, list):  # batch_isend_irecv's requests
                    for w in work:
                        w.wait()
                    waited = work
                else:
                    # A program may spin on is_completed() before it waits
                    # (torch: "returns True if completed"); the harness asks
                    # so only of calls every member has issued.
                    future = self.future_of(head, work)
                    not_polled_done = head.get("poll_ns") and not self.completes_when_polled(work, head["poll_ns"])
                    # A Work that says it completed must have its outputs in
                    # place: they may not change in wait() after that.
                    if work.is_completed():
                        said_done_with = [to_bytes(tensors[k]) for k in writes]
                        # ... and say whether it succeeded (a program reads
                        # is_success() once is_completed() says True).
                        failed_when_done = not work.is_success()
                        # ... and its future done: a DDP communication hook
                        # waits on get_future() and never calls wait().
                        future_late = future is not None and not self.future_done(future)
                    if head.get("timeout_ns"):
                        if work.wait(timeout=timeout_of(head["timeout_ns"])) is False:
                            # torch: wait(timeout) raises when the timeout expires.
                            self.reply_error(op_id, WorkerCheck(
                                "collie: %s's Work.wait(timeout=%s) returned False instead of raising: a program "
                                "carries on as if the op had completed" % (op, timeout_of(head["timeout_ns"]))))
                            return
                    else:
                        work.wait()
                    waited = [work]
                if not_polled_done:
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's Work.is_completed() stayed False for %d ms of polling without wait(), %s; "
                        "wait() then completed it: the op progresses only inside wait(), and a program that polls "
                        "is_completed() before waiting spins for ever"
                        % (op, head["poll_ns"] // 1000000,
                           "its peer having issued the matching op" if op in ("isend", "irecv")
                           else "every member having issued it")))
                    return
                # Once wait() returned, the Work says it completed (a
                # program polling is_completed() after wait() would spin).
                if not all(w.is_completed() for w in waited):
                    self.reply_error(op_id, WorkerCheck(
                        "collie: Work.is_completed() returned False after wait() returned: a completed op must "
                        "say so"))
                    return
                # ... and that it succeeded: a program checking is_success()
                # after wait() must not read a failure (torch 1.13's Python
                # cannot read Work.exception(): it returns a C++ exception_ptr).
                if not all(w.is_success() for w in waited):
                    self.reply_error(op_id, WorkerCheck(
                        "collie: wait() returned without an error, yet Work.is_success() returned False: an op "
                        "that completed without error must say so"))
                    return
                if future is not None and not self.future_done(future):
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's wait() returned, yet its Work.get_future() did not say done() within 1 s: a "
                        "callback chained on the future (a DDP communication hook) never runs" % op))
                    return
                if future_late:
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's Work said is_completed() True before wait(), yet its get_future() did not say "
                        "done() within 1 s: the future completes only inside wait(), and a DDP communication hook "
                        "(which waits on the future, never on the Work) waits for ever" % op))
                    return
                if future is not None and op in ("all_reduce", "broadcast") and not self.future_holds(future, tensors[0]):
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's Work.get_future() is done, yet its value() is not the list of the op's output "
                        "tensors: a DDP communication hook reading fut.value()[0] fails" % op))
                    return
                if failed_when_done:
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's Work said is_completed() True before wait() and is_success() False, then "
                        "wait() returned without an error: a program that polls reads a failure" % op))
                    return
                if op in ("irecv", "recv") and source is None:
                    source = global_rank(group, work._source_rank()) if group is not dist.GroupMember.WORLD \
                        else work._source_rank()
        except Exception as e:  # noqa: BLE001 -- the library's own error, reported as is
            # An op that failed has completed (torch: is_completed() "returns
            # True if completed"), unless a timeout expired with it still in
            # flight: a program that polls a failed handle must not spin.
            if work is not None and not isinstance(work, list) and "timed out" not in str(e).lower() \
                    and "timeout" not in str(e).lower():
                try:
                    still = not work.is_completed()
                except Exception:  # noqa: BLE001 -- asking a failed Work may raise again: no finding
                    still = False
                if still:
                    self.reply_error(op_id, WorkerCheck(
                        "collie: %s's wait() raised (%s), yet Work.is_completed() then returned False: an op that "
                        "failed has completed, and a program polling it spins for ever" % (op, str(e)[:300])))
                    return
            self.reply_error(op_id, e)
            return
        for k, b in enumerate(buffers):
            damage = b.damage()
            if damage:
                self.reply_error(op_id, WorkerCheck("collie: %s, on its operand %d, %s" % (op, k, damage)))
                return
        now = [to_bytes(t) for t in tensors]  # once: the checks, the kept copies and the answer
        if said_done_with is not None and said_done_with != [now[k] for k in writes]:
            self.reply_error(op_id, WorkerCheck(
                "collie: Work.is_completed() returned True before wait(), yet the op's outputs changed in wait(): "
                "they were not in place when it said so"))
            return
        not_member = group is dist.GroupMember.NON_GROUP_MEMBER
        outs = [] if not_member else writes
        # Collectives only: Gloo's receive Work waits for another message in
        # every wait() (torch does not say what a second wait() on p2p does).
        if work is not None and not isinstance(work, list) and outs and op not in P2P_OPS:
            again = self.wait_again(work, tensors, outs)
            if again:
                self.reply_error(op_id, WorkerCheck("collie: " + again))
                return
        changed = self.check_untouched(op, now, blobs, outs)
        if changed:
            self.reply_error(op_id, WorkerCheck("collie: " + changed))
            return
        answer = [now[k] for k in outs]
        for k in range(len(tensors)):
            if k not in outs:
                poison(tensors[k])
                now[k] = to_bytes(tensors[k])
        self.keep_completed(op, op_id, tensors, now)
        if work is not None and not isinstance(work, list):
            self.done_works.append((op, op_id, work))
        self.link.write({"t": "done", "id": op_id, "source": -1 if source is None else source,
                         "not_member": not_member, "outputs": outs}, answer)

    def buffers(self, head, blobs):
        """The op's tensors as a program holds them: each in a storage of its
        own, save that every other op (odd ids) gets each list operand as
        adjacent views of one storage (Buffer.chunks; ids 1 mod 4 in rotated
        order) -- programs make lists both ways. Strided runs keep their own
        layout. A tensor of its own
        starts (id - 1) % 8 elements past the 64-byte alignment, so that across a
        run the operands take every data_ptr() alignment -- and skew 0
        puts it at its storage's offset 0 (guarded after it only), as a
        fresh tensor or the first slice of a flat buffer is."""
        specs = head["tensors"]
        out = [None] * len(specs)
        at = 0
        for slot in ("tensor", "list", "output"):
            n = head.get("layout", {}).get(slot)
            if n is None:
                continue
            part = specs[at:at + n]
            if (n >= 2 and head["id"] % 2 == 1 and not self.views and len({p["dtype"] for p in part}) == 1):
                out[at:at + n] = Buffer.chunks(part, blobs[at:at + n], rotated=head["id"] % 4 == 1)
            at += n
        skew = (head["id"] - 1) % 8  # a run's ops are numbered from 1: its first at offset 0
        return [b if b is not None else Buffer(spec, blob, self.views, skew) for b, spec, blob in zip(out, specs, blobs)]

    def op(self, head, blobs):
        op_id = head["id"]
        buffers = self.buffers(head, blobs)
        tensors = [b.tensor for b in buffers]
        try:
            work, source = self.issue(head, tensors)
        except Exception as e:  # noqa: BLE001
            self.reply_error(op_id, e)
            if head.get("async", False):
                self.answered.add(op_id)  # the controller may still ask to wait for it
            return
        group = self.groups.get(head.get("group", 0))
        recycled = self.check_done_works(work) if work is not None and not isinstance(work, list) else None
        if recycled:
            self.reply_error(op_id, WorkerCheck("collie: " + recycled))
            if head.get("async", False):
                self.answered.add(op_id)  # the controller still asks to wait for it
            return
        if head.get("must_be_pending") and work is not None and not isinstance(work, list) and work.is_completed():
            # A member of the group calls it later: it cannot have completed.
            self.reply_error(op_id, WorkerCheck(
                "collie: %s's Work.is_completed() returned True as it was issued, while a member of its group had "
                "not called it yet: it cannot have completed" % head["op"]))
            if head.get("async", False):
                self.answered.add(op_id)  # the controller still asks to wait for it
            return
        if head.get("async", False):
            self.handles[op_id] = (head, work, buffers, source, group, blobs)
            return
        self.complete(op_id, head, work, buffers, source, group, blobs)

    def serve(self):
        while True:
            head, blobs = self.link.read()
            t = head.get("t")
            if t == "end":
                return 0
            if t == "begin":
                self.views = head.get("views")
                self.begin_run(head.get("timeout_ns"))
            elif t == "group":
                self.make_group(head["group"], head["ranks"], head.get("timeout_ns"))
            elif t == "ungroup":
                self.destroy_group(head["group"])
            elif t == "op":
                self.op(head, blobs)
            elif t == "wait":
                if head["id"] in self.answered:  # it failed when issued: answered already
                    self.answered.discard(head["id"])
                    continue
                h, work, buffers, source, group, blobs = self.handles.pop(head["id"])
                self.complete(head["id"], h, work, buffers, source, group, blobs)
            elif t == "sync":
                self.link.write({"t": "synced", "id": head.get("id", 0)})
            elif t == "bench":
                try:
                    self.link.write({"t": "bench_rows", "rows": bench(self.rank, self.world, head.get("options", {}))})
                except Exception as e:  # noqa: BLE001
                    self.link.write({"t": "bench_failed", "error": "%s: %s" % (type(e).__name__, e)})
            else:
                raise ValueError("the controller sent a message of type %r" % t)


# ---- collie bench's timed loop (tools/bench.cpp), the torch way -------------

PERIOD = 10
LIST_OPS = ("all_gather", "scatter", "gather")
# Ops whose buffer is cut into one chunk per rank (nccl-tests' size is the whole buffer).
CHUNKED_OPS = LIST_OPS + ("reduce_scatter", "all_to_all")
BENCH_OPS = ("all_reduce", "broadcast", "reduce", "barrier", "sendrecv") + CHUNKED_OPS


def bench_input(o, r, n, phase=0):
    idx = (torch.arange(n, dtype=torch.int64) + phase) % PERIOD
    if o["reduce_op"] == "PRODUCT":
        v = 1 + (r + idx) % 2
    else:
        v = 1 + (r * 3 + idx) % 5
    return v.to(DTYPES[o["dtype"]])


def bench_expected_reduction(o, world, n, phase=0):
    acc = bench_input(o, 0, n, phase)
    for r in range(1, world):
        x = bench_input(o, r, n, phase)
        name = o["reduce_op"]
        if name in ("SUM", "AVG"):
            acc = acc + x
        elif name == "PRODUCT":
            acc = acc * x
        elif name == "MIN":
            acc = torch.minimum(acc, x)
        elif name == "MAX":
            acc = torch.maximum(acc, x)
        elif name == "BAND":
            acc = acc & x
        elif name == "BOR":
            acc = acc | x
        elif name == "BXOR":
            acc = acc ^ x
    if o["reduce_op"] == "AVG":
        acc = acc / world
    return acc.to(DTYPES[o["dtype"]])


def count_wrong(got, want):
    got = got.cpu()
    return int((got.view(torch.uint8).reshape(got.numel(), -1) !=
                want.view(torch.uint8).reshape(want.numel(), -1)).any(dim=1).sum().item()) if got.numel() else 0


def bench(rank, world, o):
    dtype = DTYPES[o["dtype"]]
    es = ELEMENT_SIZE[o["dtype"]]
    op = o["op"]
    root = o.get("root", 0)
    if op not in BENCH_OPS:
        raise ValueError("bench: unknown op %r" % op)
    rop = reduce_op(o.get("reduce_op", "SUM")) if op in ("all_reduce", "reduce", "reduce_scatter") else None
    if op == "barrier":
        sizes = [0]
    elif o.get("sizes"):
        sizes = list(o["sizes"])
    else:
        sizes, b = [], float(max(o["min_bytes"], 1))
        while b <= o["max_bytes"] * 1.0000001:
            sizes.append(int(b))
            b *= o["step_factor"]
    rows = []
    for want_bytes in sizes:
        count = want_bytes // es
        unit = world if op in CHUNKED_OPS else 1
        count -= count % unit
        if op != "barrier" and count == 0:
            continue
        chunk = count // unit if op in CHUNKED_OPS else count
        whole_input = op in ("reduce_scatter", "all_to_all")
        main = torch.zeros(count if whole_input else chunk, dtype=dtype, device=DEVICE)
        recv = torch.zeros(count if op == "all_to_all" else chunk, dtype=dtype, device=DEVICE)
        lst = [torch.zeros(chunk, dtype=dtype, device=DEVICE) for _ in range(world)] \
            if op == "all_gather" or (op in ("scatter", "gather") and rank == root) else None

        def once():
            if op == "all_reduce":
                dist.all_reduce(main, op=rop)
            elif op == "broadcast":
                dist.broadcast(main, root)
            elif op == "reduce":
                dist.reduce(main, root, op=rop)
            elif op == "all_gather":
                dist.all_gather(lst, main)
            elif op == "scatter":
                dist.scatter(main, scatter_list=lst, src=root)
            elif op == "gather":
                dist.gather(main, gather_list=lst, dst=root)
            elif op == "reduce_scatter":
                dist.reduce_scatter_tensor(recv, main, op=rop)
            elif op == "all_to_all":
                dist.all_to_all_single(recv, main)
            elif op == "barrier":
                dist.barrier()
            elif op == "sendrecv":
                works = [dist.irecv(recv, (rank - 1) % world, tag=7), dist.isend(main, (rank + 1) % world, tag=7)]
                for w in works:
                    w.wait()

        iters = o.get("iters") or max(5, min(1000, (1 << 30) // max(count * es, 1)))
        for _ in range(o.get("warmup_iters", 5)):
            once()
        dist.barrier()
        synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            once()
        synchronize()
        t1 = time.perf_counter_ns()
        slowest = torch.tensor([(t1 - t0) / iters], dtype=torch.float64, device=DEVICE)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        wrong = -1
        if o.get("check", True) and op != "barrier":
            if op == "broadcast":
                main.copy_(bench_input(o, rank, chunk) if rank == root else torch.zeros(chunk, dtype=dtype))
            elif op == "scatter" and lst is not None:
                for r in range(world):
                    lst[r].copy_(bench_input(o, r, chunk))
            else:
                main.copy_(bench_input(o, rank, main.numel()))
            once()
            bad = 0
            if op == "all_reduce" or (op == "reduce" and rank == root):
                bad = count_wrong(main, bench_expected_reduction(o, world, chunk))
            elif op == "broadcast":
                bad = count_wrong(main, bench_input(o, root, chunk))
            elif op == "scatter":
                bad = count_wrong(main, bench_input(o, rank, chunk))
            elif op == "sendrecv":
                bad = count_wrong(recv, bench_input(o, (rank - 1) % world, chunk))
            elif op == "reduce_scatter":  # this rank's chunk of the reduced whole
                bad = count_wrong(recv, bench_expected_reduction(o, world, chunk, rank * chunk))
            elif op == "all_to_all":  # block r: rank r's chunk `rank`
                bad = sum(count_wrong(recv[r * chunk:(r + 1) * chunk], bench_input(o, r, chunk, rank * chunk))
                          for r in range(world))
            elif op == "all_gather" or (op == "gather" and rank == root):
                bad = sum(count_wrong(lst[r], bench_input(o, r, chunk)) for r in range(world))
            total = torch.tensor([bad], dtype=torch.int64, device=DEVICE)
            dist.all_reduce(total)
            wrong = int(total.item())
        if rank == 0:
            time_us = slowest.item() / 1e3
            nbytes = count * es
            algbw = nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
            n = float(world)
            factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n if op in CHUNKED_OPS else \
                0.0 if op == "barrier" else 1.0
            rows.append({"bytes": nbytes, "count": count, "iters": iters, "time_us": time_us,
                         "algbw_GBps": algbw, "busbw_GBps": algbw * factor, "wrong": wrong})
    return rows


def start_process_group(backend, rank, world, op_timeout):
    """init_process_group, after every rank's process has started.

    The op timeout (COLLIE_TIMEOUT_NS) may be a few seconds, but starting
    Python and importing torch takes seconds per process on a loaded machine;
    with env:// the op timeout would also bound how long rank 1 waits for
    rank 0's store, so a slow start would fail as a connect timeout. Instead
    the ranks meet on torch's TCPStore under COLLIE_START_TIMEOUT_MS first,
    and the process group, built on that store once all are there, gets the
    op timeout for its connections and collectives.
    """
    if backend == "mpi":  # MPI starts its ranks itself; no store to meet on
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=op_timeout)
        return
    start_timeout = datetime.timedelta(milliseconds=int(os.environ.get("COLLIE_START_TIMEOUT_MS", "300000")))
    store = meet(rank, world, start_timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=op_timeout)


def meet(rank, world, start_timeout):
    """The store every rank has joined (start_store), once all have."""
    store = start_store(rank, world, start_timeout)
    if store.add("collie/arrived", 1) == world:
        store.set("collie/all_arrived", "1")
    store.wait(["collie/all_arrived"])
    port_file = os.environ.get("COLLIE_STORE_PORT_FILE")
    if rank == 0 and port_file:
        try:
            os.unlink(port_file)  # every rank has read it: each added itself to the store it names
        except OSError:
            pass
    return store


def start_store(rank, world, start_timeout):
    """The TCPStore the ranks meet on (rank 0 serves it).

    With COLLIE_STORE_PORT_FILE, rank 0 listens on a port the kernel picks,
    then writes it to that file (whole: written beside it and renamed), and
    the others wait for the file. A port chosen ahead (MASTER_PORT) may be
    taken between the choice and rank 0's bind, seconds later: by another
    job's rank 0, whose store the other ranks would then join."""
    addr = os.environ["MASTER_ADDR"]
    port_file = os.environ.get("COLLIE_STORE_PORT_FILE")
    if not port_file:
        return dist.TCPStore(addr, int(os.environ["MASTER_PORT"]), world, rank == 0, timeout=start_timeout)
    if rank == 0:
        store = dist.TCPStore(addr, 0, world, True, timeout=start_timeout, wait_for_workers=False)
        partial = port_file + ".partial"
        with open(partial, "w") as f:
            f.write(str(store.port))
        os.replace(partial, port_file)
        return store
    deadline = time.monotonic() + start_timeout.total_seconds()
    while True:
        try:
            with open(port_file) as f:
                port = int(f.read())
            break
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise TimeoutError("rank 0 did not say its store's port (%s) within %s" % (port_file, start_timeout))
            time.sleep(0.005)  # rank 0 is still starting (importing torch takes seconds)
    return dist.TCPStore(addr, port, world, False, timeout=start_timeout)


def main():
    # A fatal signal in the library (Gloo's SIGFPE, an abort) prints the
    # Python stack on stderr: the last lines collie reports for the rank.
    faulthandler.enable()
    for module in filter(None, (m.strip() for m in os.environ.get("COLLIE_TORCH_IMPORT", "").split(","))):
        try:
            if module.endswith(".py"):
                spec = importlib.util.spec_from_file_location(os.path.basename(module)[:-3], module)
                if spec is None or spec.loader is None:
                    raise ImportError("not a Python file")
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            else:
                importlib.import_module(module)
        except BaseException as e:  # noqa: BLE001 -- SystemExit too: the import is broken either way
            fail_start("--torch-import %s failed: %s: %s" % (module, type(e).__name__, e))
    backend = os.environ.get("COLLIE_TORCH_BACKEND", "gloo")
    try:
        dist.Backend(backend)
    except ValueError:
        known = sorted({"gloo", "mpi", "nccl", "ucc"} | {str(p).lower() for p in getattr(dist.Backend, "_plugins", {})})
        fail_start("torch.distributed has no backend '%s' (torch %s knows %s; a backend of your own is registered by "
                   "a module given with --torch-import)" % (backend, torch.__version__, ", ".join(known)))
    availability = {"gloo": dist.is_gloo_available, "mpi": dist.is_mpi_available, "nccl": dist.is_nccl_available}
    if backend in availability and not availability[backend]():
        fail_start("torch %s at %s was built without the '%s' backend" % (torch.__version__, sys.executable, backend))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    global DEVICE
    DEVICE = device_for(backend)
    timeout = datetime.timedelta(microseconds=int(os.environ.get("COLLIE_TIMEOUT_NS", DEFAULT_TIMEOUT_NS)) / 1000.0)
    try:
        start_process_group(backend, rank, world, timeout)
    except Exception as e:  # noqa: BLE001
        fail_start("init_process_group(%r) failed: %s: %s" % (backend, type(e).__name__, e))
    link = Link(os.environ["COLLIE_CONTROLLER"])
    head, _ = link.read()
    token = os.environ.get("COLLIE_JOB_TOKEN", "").encode("utf-8")
    mac = hmac.new(token, ("collie op worker " + head["nonce"] + " " + str(rank)).encode("utf-8"),
                   hashlib.sha256).hexdigest()
    library = "torch %s %s" % (torch.__version__, backend)
    link.write({"t": "hello", "rank": rank, "world": world, "pid": os.getpid(), "host": socket.gethostname(),
                "library": library, "mac": mac})
    try:
        return Worker(link, rank, world, int(os.environ.get("COLLIE_TIMEOUT_NS", DEFAULT_TIMEOUT_NS))).serve()
    except (EOFError, ConnectionError) as e:
        sys.stderr.write("collie torch worker (rank %d): %s\n" % (rank, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
