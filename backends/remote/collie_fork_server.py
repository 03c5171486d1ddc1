#!/usr/bin/env python3
"""collie's fork server: import once, fork many.

    python3 -u collie_fork_server.py PROGRAM [MODULE ...]

imports each MODULE (torch, torch.distributed: seconds of CPU), then forks a
copy of itself for every rank process collie asks for; the copy runs
PROGRAM as __main__, its imports already done. The protocol (one JSON
object a SOCK_SEQPACKET packet on the descriptor COLLIE_FORK_SERVER_FD) is
described in backends/remote/fork_server.h. The server exits when collie
closes its end, and every child it started dies with it.

Exit codes: 3 an import failed (collie then starts the ranks itself, where
the same failure is reported as usual).
"""

import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback

PR_SET_PDEATHSIG = 1


def send(sock, message):
    sock.send(json.dumps(message).encode("utf-8"))


def run_child(program, request, out_fd, server_pid):
    """In the forked child: become the rank process and never return."""
    code = 1
    try:
        try:
            os.setpgid(0, request.get("pgid", 0))
        except OSError:
            # The job's group ended with its last member, which this server
            # reaped already (a rank that exited at once): a group of its own.
            os.setpgid(0, 0)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server_pid:  # the server is already gone
            os._exit(137)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        os.environ.pop("COLLIE_FORK_SERVER_FD", None)
        os.environ.update(request.get("env", {}))
        sys.argv = [program]
        sys.path[0] = os.path.dirname(os.path.abspath(program))  # as if started as `python3 PROGRAM`
        runpy.run_path(program, run_name="__main__")
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            sys.stderr.write("%s\n" % e.code)
            code = 1
    except BaseException:  # noqa: BLE001 -- whatever it was, the rank's output says it
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main():
    sock = socket.socket(fileno=int(os.environ.pop("COLLIE_FORK_SERVER_FD")))
    if len(sys.argv) < 2:
        sys.exit(2)
    program = sys.argv[1]
    for module in sys.argv[2:]:
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 -- collie falls back to starting the ranks itself
            sys.exit(3)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    server_pid = os.getpid()
    send(sock, {"t": "ready"})
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            send(sock, {"t": "exited", "pid": pid, "status": status})
        if sock not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 1)
        if not data:
            return 0  # collie is gone
        request = json.loads(data.decode("utf-8"))
        if request.get("t") != "spawn" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            send(sock, {"t": "spawn_failed", "error": "a request without one output descriptor"})
            continue
        try:
            pid = os.fork()
        except OSError as e:
            os.close(fds[0])
            send(sock, {"t": "spawn_failed", "error": str(e)})
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock.close()
            os.close(wake_r)
            os.close(wake_w)
            run_child(program, request, fds[0], server_pid)
        try:
            os.setpgid(pid, request.get("pgid", 0) or pid)  # also here: no race with the child
        except OSError:
            try:
                os.setpgid(pid, pid)  # as the child falls back to
            except OSError:
                pass
        os.close(fds[0])
        send(sock, {"t": "spawned", "pid": pid})


if __name__ == "__main__":
    sys.exit(main())
