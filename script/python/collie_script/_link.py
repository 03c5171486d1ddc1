"""The connection of one process to the collie controller (script/script_protocol.h).

Framing is the op protocol's: [u32 little-endian N][N bytes of JSON][blobs],
the JSON's "blobs" listing each binary attachment's length. The controller
only ever answers requests, so exactly one thread -- the one holding
`rpc_lock` -- reads; writes (requests, and output from the capture thread)
go through `send_lock`, so that a message is never interleaved with
another.
"""

import hmac
import json
import os
import socket
import struct
import sys
import threading


# The JSON headers: compact, and without the circular-reference check (a
# header is plain data built here).
_encode = json.JSONEncoder(ensure_ascii=True, check_circular=False, separators=(",", ":")).encode
_decode = json.JSONDecoder().decode
_LENGTH = struct.Struct("<I")


class ControllerGone(RuntimeError):
    """The collie controller closed the connection (the run is over)."""


class Link:
    def __init__(self, address, token, send_lock, unix_path=""):
        if unix_path and os.path.exists(unix_path):
            # The controller's host: its Unix socket is cheaper than loopback TCP.
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(unix_path)
        else:
            host, _, port = address.rpartition(":")
            self.sock = socket.create_connection((host, int(port)))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.send_lock = send_lock
        self.rpc_lock = threading.RLock()
        self.next_id = 0
        head, _ = self._read_message()
        if head.get("t") != "challenge":
            raise ControllerGone("the controller did not start with a challenge")
        nonce = head["nonce"]
        pid = os.getpid()
        mac = hmac.new(token.encode("utf-8"), ("collie script " + nonce + " " + str(pid)).encode("utf-8"),
                       "sha256").hexdigest()
        self.send({"t": "hello", "pid": pid, "ppid": os.getppid(), "argv": list(sys.argv), "mac": mac})

    # ---- raw I/O ---------------------------------------------------------

    def _read(self, n):
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(max(65536, n - len(self.buf)))
            except OSError as e:
                raise ControllerGone("the collie controller went away (%s)" % e) from None
            if not chunk:
                raise ControllerGone("the collie controller closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_message(self):
        (n,) = _LENGTH.unpack(self._read(4))
        head = _decode(self._read(n).decode("utf-8"))
        sizes = head.get("blobs")
        blobs = [self._read(size) for size in sizes] if sizes else []
        return head, blobs

    def send(self, head, blobs=(), locked=False):
        """Sends one message (one send call); `locked`: the caller holds
        send_lock. `head` gains "blobs" when there are any."""
        if blobs:
            head["blobs"] = [len(b) for b in blobs]
        text = _encode(head).encode("utf-8")
        data = b"".join([_LENGTH.pack(len(text)), text, *blobs])
        try:
            if locked:
                self.sock.sendall(data)
            else:
                with self.send_lock:
                    self.sock.sendall(data)
        except OSError as e:
            raise ControllerGone("the collie controller went away (%s)" % e) from None

    # ---- requests ----------------------------------------------------------

    def request(self, head, blobs=(), before_send=None):
        """Sends a request and returns the answer (head, blobs); `head` (the
        caller's own dict) gains "id".

        `before_send(link)` runs with send_lock held, just before the request
        goes out: the output written so far is shipped there, so that the
        controller stamps it with the time of the previous answer.
        """
        with self.rpc_lock:
            self.next_id += 1
            my_id = head["id"] = self.next_id
            with self.send_lock:
                if before_send is not None:
                    before_send(self)
                self.send(head, blobs, locked=True)
            while True:
                answer, answer_blobs = self._read_message()
                if answer.get("id") == my_id:
                    return answer, answer_blobs

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
