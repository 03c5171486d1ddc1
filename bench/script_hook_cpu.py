"""A rank's own CPU per op under `collie run -- python ...`, without the
controller: blocking 8-byte all_reduces through the real hook (torch ->
CollieProcessGroup -> the binary request over a Unix socket) against a
forked stand-in controller that answers every op with a canned "done" (its
CPU is not counted). Beside it, the floor under any hook: torch's own
dispatch into a Python ProcessGroup whose all_reduce returns a completed
Work at once, and a bare request/answer of 8 bytes over a socketpair.

    /usr/bin/python3 bench/script_hook_cpu.py [HOOK_DIR] [N]

HOOK_DIR: the hook's directory (default: script/python beside this file),
so that two trees' hooks can be compared in one invocation. Prints CPU
(process time) and wall per op for each of the three."""
import datetime
import os
import socket
import struct
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
hook_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "script", "python")
n_ops = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
sys.path.insert(0, hook_dir)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import collie_script  # noqa: E402
from collie_script import _capture, _link, _torch  # noqa: E402

LENGTH = struct.Struct("<I")


def per_op(loop):
    loop(1000)  # warm-up
    c0, w0 = time.process_time(), time.perf_counter()
    loop(n_ops)
    return (time.process_time() - c0) / n_ops * 1e6, (time.perf_counter() - w0) / n_ops * 1e6


def stand_in_controller(sock):
    """Answers each binary request with done: output 0 = two float32 2.0."""
    buf = bytearray()
    blob = struct.pack("<ff", 2.0, 2.0)

    def read(n):
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                os._exit(0)
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    while True:
        (n,) = LENGTH.unpack(read(4))
        header = read(n & ~_link._BINARY_FLAG)
        payload, my_id = struct.unpack_from("<QQ", header)
        read(payload)
        answer = _link._ANSWER.pack(1, 0, 1, -1, my_id, 7) + _link._OUTPUT.pack(0, 8)
        sock.sendall(LENGTH.pack(len(answer) | _link._BINARY_FLAG) + answer + blob)


class CannedLink(_link.Link):
    """A Link over an already connected socket, without the handshake."""

    def __init__(self, sock):  # noqa: super().__init__ would do the handshake
        self.sock = sock
        self.buf = bytearray()
        self.send_lock = _capture.IO_LOCK
        self.rpc_lock = threading.RLock()
        self.next_id = 0
        self.sites = {}


def hook():
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        stand_in_controller(theirs)
    theirs.close()
    proc = collie_script._Process(None)
    proc.link = CannedLink(ours)
    collie_script._proc = proc
    _torch._learn_codes({
        "ops": ["send", "recv", "broadcast", "reduce", "all_reduce", "all_gather", "gather", "scatter",
                "reduce_scatter", "all_to_all", "barrier", "all_gather_into_tensor", "reduce_scatter_tensor",
                "all_to_all_single", "batch_isend_irecv", "monitored_barrier"],
        "dtypes": ["float32", "float64", "int32", "int64", "float16", "bfloat16", "int8", "uint8", "bool"],
        "reduce_ops": ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]})
    _torch._state.c10d_file = dist.distributed_c10d.init_process_group.__code__.co_filename
    dist.Backend.register_backend("collie", _torch._create)
    _torch._state.pending = (0, [0])
    dist.init_process_group("collie", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.ones(2)

    def loop(n):
        for _ in range(n):
            dist.all_reduce(t)

    result = per_op(loop)
    if t.tolist() != [2.0, 2.0]:
        raise SystemExit("the hook did not write the answer into the tensor: %s" % t)
    dist.destroy_process_group()
    ours.close()
    os.waitpid(pid, 0)
    return result


def torch_dispatch():
    class Done(torch._C._distributed_c10d.Work):
        def wait(self, timeout=None):
            return True

    done = Done()

    class Instant(torch._C._distributed_c10d.ProcessGroup):
        def allreduce(self, tensors, opts=None):
            return done

        def getBackendName(self):  # noqa: N802 -- torch's name
            return "instant"

    dist.Backend.register_backend("instant", lambda store, rank, size, timeout: Instant(rank, size))
    dist.init_process_group("instant", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.ones(2)

    def loop(n):
        for _ in range(n):
            dist.all_reduce(t)

    result = per_op(loop)
    dist.destroy_process_group()
    return result


def socket_round_trip():
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        while True:
            m = theirs.recv(64)
            if not m:
                os._exit(0)
            theirs.send(m)
    theirs.close()

    def loop(n):
        for _ in range(n):
            ours.send(b"12345678")
            ours.recv(64)

    result = per_op(loop)
    ours.close()
    os.waitpid(pid, 0)
    return result


print("# %d ops each; hook from %s; %d cores, load %s" % (n_ops, os.path.abspath(hook_dir), os.cpu_count(),
                                                        " ".join(open("/proc/loadavg").read().split()[:3])))
for name, f in (("hook, stand-in controller", hook), ("torch dispatch alone", torch_dispatch),
                ("8-byte socket round trip", socket_round_trip)):
    cpu, wall = f()
    print("%-28s cpu %7.2f us/op   wall %7.2f us/op" % (name, cpu, wall))
