"""Requests collie's hook would never send (collie run -n 1): an op of an
unknown kind, which is refused naming the rank (and the run goes on), then
a binary request too short to carry its id, which ends the run."""
import struct

import torch
import torch.distributed as dist

import collie_script
from collie_script._link import _BINARY_FLAG, _LENGTH, REQUEST_OP


def send_raw(link, data):
    """Sends `data` as the hook sends a request: under send_lock (never inside
    the capture thread's output message), after the output written so far."""
    with link.send_lock:
        collie_script._ship_output(link)
        link.sock.sendall(data)


dist.init_process_group("gloo")
link = collie_script.link()
with link.rpc_lock:
    link.next_id += 1
    header = REQUEST_OP.pack(0, link.next_id, 1, 0, 0, 0, 0, 0, 250, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0)
    send_raw(link, _LENGTH.pack(len(header) | _BINARY_FLAG) + header)
    answer, _ = link._answer(link.next_id)
print("refused:", answer["error"], flush=True)
t = torch.ones(1)
dist.all_reduce(t)
t += 1
print("then:", t, flush=True)
send_raw(link, _LENGTH.pack(8 | _BINARY_FLAG) + struct.pack("<Q", 0))
link._answer(-1)  # never answered: the run ends
