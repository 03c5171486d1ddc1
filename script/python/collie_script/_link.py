"""The connection of one process to the collie controller (script/script_protocol.h).

Framing: [u32 little-endian L][header][blobs]. With bit 31 of L clear the
header is L bytes of JSON, its "blobs" listing each binary attachment's
length; with it set the controller sent a binary answer (done, issued or
pending; script_protocol.h says the layout), read here as the JSON answer it
stands for. The controller
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
_BINARY_FLAG = 0x80000000
# A binary answer: type, 0, n_outputs, source, id, op; then per output
# (buffer index, blob bytes).
_ANSWER = struct.Struct("<BBHiQQ")
_OUTPUT = struct.Struct("<IQ")
_ANSWER_TYPES = (None, "done", "issued", "pending")
# A binary request (script_protocol.h): the common part -- payload bytes,
# id, type, flags, 0, site, site's definition bytes, 0 -- then the type's.
REQUEST_OP = struct.Struct("<QQBBHIII" "BBBBIIIiiqIIII")
REQUEST_WAIT = struct.Struct("<QQBBHIIIQq")  # op, timeout_ns


def site_frames(site_key):
    """A call site's key (code, line, code, line, ...) as the protocol's
    "where": [[file, line, function], ...]."""
    return [[code.co_filename, line, code.co_name] for code, line in zip(site_key[::2], site_key[1::2])]


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
        self.sites = {}  # call site (code, line, code, line, ...) -> its number on this connection
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
        if n & _BINARY_FLAG:
            return self._read_binary(self._read(n & ~_BINARY_FLAG))
        head = _decode(self._read(n).decode("utf-8"))
        sizes = head.get("blobs")
        blobs = [self._read(size) for size in sizes] if sizes else []
        return head, blobs

    def _read_binary(self, header):
        kind, _, n_outputs, source, my_id, op = _ANSWER.unpack_from(header)
        if kind >= len(_ANSWER_TYPES) or kind == 0 or len(header) != _ANSWER.size + n_outputs * _OUTPUT.size:
            raise ControllerGone("the collie controller sent a malformed binary answer")
        head = {"t": _ANSWER_TYPES[kind], "id": my_id, "op": op}
        if kind == 1:
            outputs, blobs, at = [], [], _ANSWER.size
            for _ in range(n_outputs):
                k, size = _OUTPUT.unpack_from(header, at)
                at += _OUTPUT.size
                outputs.append(k)
                blobs.append(self._read(size))
            head["outputs"] = outputs
            if source >= 0:
                head["source"] = source
            return head, blobs
        return head, []

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
            return self._answer(my_id)

    def request_binary(self, st, kind, flags, rest, site_key, tail, blobs, before_send=None):
        """A binary request (script_protocol.h): `st` packs the common part
        (payload bytes, id, kind, flags, 0, site, its definition's bytes, 0)
        and then `rest`; `tail` follows, then the site's definition the first
        time `site_key` -- (code, line, ...) of the program's frames -- is
        sent on this connection, then `blobs`. Returns the answer as request()."""
        with self.rpc_lock:
            self.next_id += 1
            my_id = self.next_id
            site = self.sites.get(site_key)
            definition = b""
            if site is None:
                site = self.sites[site_key] = len(self.sites) + 1
                definition = _encode(site_frames(site_key)).encode("utf-8")
            header = st.pack(sum(map(len, blobs)), my_id, kind, flags, 0, site, len(definition), 0, *rest)
            data = b"".join([_LENGTH.pack((len(header) + len(tail) + len(definition)) | _BINARY_FLAG), header, tail,
                             definition, *blobs])
            with self.send_lock:
                if before_send is not None:
                    before_send(self)
                try:
                    self.sock.sendall(data)
                except OSError as e:
                    raise ControllerGone("the collie controller went away (%s)" % e) from None
            return self._answer(my_id)

    def _answer(self, my_id):
        while True:
            answer, answer_blobs = self._read_message()
            if answer.get("id") == my_id:
                return answer, answer_blobs

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
