"""A process's stdout and stderr (fds 1 and 2), captured for the controller.

Both fds are pointed at one pipe (so that their lines keep the order in
which they were written) that this process drains itself: a thread ships
what arrives, and `drain_locked()` takes the rest just before every request
to the controller. All reads of the pipe and all sends happen under
IO_LOCK, so output written before a request always reaches the controller
before it -- which is what lets the controller stamp each line with the
rank's virtual time deterministically.

Only the stream collie gave the process is captured: a Python program that
the script starts with its own pipes (subprocess with capture_output) keeps
them. COLLIE_SCRIPT_STREAM holds the identity (st_dev:st_ino) of the pipe
of the capturing process; a child whose fd 1 is still that pipe captures
too, a child whose fd 1 is something else does not.
"""

import os
import select
import sys
import threading

IO_LOCK = threading.Lock()
STREAM_ENV = "COLLIE_SCRIPT_STREAM"
MAX_PENDING = 64 << 20  # output kept for a process with no connection yet


def _identity(fd):
    st = os.fstat(fd)
    return "%d:%d" % (st.st_dev, st.st_ino)


def should_capture():
    want = os.environ.get(STREAM_ENV, "")
    if not want:
        return True  # a process collie started itself
    try:
        return _identity(1) == want
    except OSError:
        return False


class Capture:
    def __init__(self):
        self.link = None        # set once the process talks to the controller
        self.pending = []       # output read before that
        self.pending_bytes = 0
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001 -- a closed stream has nothing to flush
                pass
        r, w = os.pipe()
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        os.set_blocking(r, False)
        self.r = r
        # Whether the pipe holds anything: a poll is a third of what a read
        # that finds nothing costs (it raises), and most requests find nothing.
        self.ready = select.poll()
        self.ready.register(r, select.POLLIN)
        os.environ[STREAM_ENV] = _identity(1)
        for f in (sys.stdout, sys.stderr):
            try:
                f.reconfigure(line_buffering=True)
            except Exception:  # noqa: BLE001 -- a replaced stream may not take it
                pass
        self.thread = threading.Thread(target=self._loop, name="collie-output", daemon=True)
        self.thread.start()

    def _loop(self):
        poller = select.poll()
        poller.register(self.r, select.POLLIN)
        while True:
            try:
                poller.poll()
            except InterruptedError:
                continue
            with IO_LOCK:
                try:
                    self.drain_locked()
                except Exception:  # noqa: BLE001 -- the controller is gone; output has nowhere to go
                    return

    def drain_locked(self):
        """Reads everything in the pipe and ships it (IO_LOCK held)."""
        if not self.ready.poll(0):
            return
        chunks = []
        while True:
            try:
                data = os.read(self.r, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        if not chunks:
            return
        data = b"".join(chunks)
        if self.link is None:
            if self.pending_bytes < MAX_PENDING:
                self.pending.append(data)
                self.pending_bytes += len(data)
            return
        self.link.send({"t": "out"}, [data], locked=True)

    def attach_locked(self, link):
        """From now on output goes to `link`; what was kept goes first (IO_LOCK held)."""
        self.link = link
        if self.pending:
            data = b"".join(self.pending)
            self.pending, self.pending_bytes = [], 0
            link.send({"t": "out"}, [data], locked=True)

    def has_pending(self):
        return bool(self.pending)


def flush_python_streams():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:  # noqa: BLE001
            pass
