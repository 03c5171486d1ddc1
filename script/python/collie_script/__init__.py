"""collie_script: an unmodified torch.distributed program, run on collie.

`collie run [-n N] -- python script.py ARGS` starts the program with this
package on the path (through sitecustomize.py beside it). In every Python
process of the program it

  - makes every process group collie's: torch.distributed is patched as it
    is imported (_torch.py) -- init_process_group and new_group create a
    ProcessGroup subclass whatever backend the script names, and every op
    on it is one request to the controller, which runs it on the chosen
    backend, checks it against the oracle and answers with the results;
  - captures fds 1 and 2 (_capture.py) and ships them to the controller,
    which stamps each line with the rank and its virtual time;
  - reports how the process ends: an uncaught exception with its
    traceback (sys.excepthook, multiprocessing's Process, torch's spawn),
    and its exit;
  - starts multiprocessing's "spawn" children by forking (_spawn.py), so
    that each does not import torch again.

The protocol is script/script_protocol.h. Environment (set by collie):
  COLLIE_SCRIPT_CONTROLLER  host:port of the controller
  COLLIE_SCRIPT_UNIX        the controller's Unix socket, used where it exists
  COLLIE_JOB_TOKEN          the run's token (proven by HMAC, never sent)
  COLLIE_SCRIPT_STREAM      the identity of the stream to capture (_capture.py)
"""

import atexit
import importlib.abc
import os
import sys
import threading
import traceback

from . import _capture
from ._link import ControllerGone, Link, site_frames

CONTROLLER_ENV = "COLLIE_SCRIPT_CONTROLLER"
TOKEN_ENV = "COLLIE_JOB_TOKEN"
UNIX_ENV = "COLLIE_SCRIPT_UNIX"
EXIT_CONTROLLER_GONE = 70  # the run ended under this process (the controller closed)


class _Process:
    """What this process has said to the controller."""

    def __init__(self, capture):
        self.capture = capture
        self.link = None
        self.exit_sent = False
        self.exception_sent = False
        self.connect_lock = threading.Lock()


_proc = None
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _launcher_env():
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from srun's or
    mpirun's variables, where the launcher set no torch variables itself (as
    torchrun would)."""
    env = os.environ
    if "RANK" in env:
        return
    for rank, size, local, local_size in (
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
            ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")):
        if rank in env and size in env:
            env["RANK"] = env[rank]
            env["WORLD_SIZE"] = env[size]
            env["LOCAL_RANK"] = env.get(local, "0")
            if local_size in env:
                env["LOCAL_WORLD_SIZE"] = env[local_size]
            env.setdefault("MASTER_ADDR", "127.0.0.1")
            env.setdefault("MASTER_PORT", "29500")
            return


def link():
    """The connection to the controller, made on first use."""
    p = _proc
    if p.link is not None:
        return p.link
    with p.connect_lock:
        if p.link is None:
            try:
                new = Link(os.environ[CONTROLLER_ENV], os.environ.get(TOKEN_ENV, ""), _capture.IO_LOCK,
                           os.environ.get(UNIX_ENV, ""))
            except (OSError, ControllerGone) as e:
                _controller_gone(e)
            with _capture.IO_LOCK:
                if p.capture is not None:
                    p.capture.attach_locked(new)
            p.link = new
    return p.link


def _controller_gone(e):
    # The run is over (the controller ended it, or died): nothing this
    # process does can be seen any more.
    os._exit(EXIT_CONTROLLER_GONE)


def _ship_output(link_):
    if _proc.capture is not None:
        _proc.capture.drain_locked()


def request(head, blobs=()):
    """One request to the controller; returns its answer (head, blobs)."""
    l = link()
    _capture.flush_python_streams()
    try:
        return l.request(head, blobs, before_send=_ship_output)
    except ControllerGone as e:
        _controller_gone(e)


def request_binary(st, kind, flags, rest, site_key, tail=b"", blobs=()):
    """One binary request (_link.Link.request_binary); returns its answer."""
    l = link()
    _capture.flush_python_streams()
    try:
        return l.request_binary(st, kind, flags, rest, site_key, tail, blobs, before_send=_ship_output)
    except ControllerGone as e:
        _controller_gone(e)


# ---- where the program is -----------------------------------------------------

_skip_cache = {}
_user_code = {}   # code object -> whether it is the program's (the per-op walk's cache)
_spawn_child_code = None  # _spawn._child's code, once a child is forked there


def _skip_prefixes():
    import sysconfig

    prefixes = [os.path.dirname(_PACKAGE_DIR) + os.sep]  # this package and sitecustomize.py
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            prefixes.append(os.path.abspath(p) + os.sep)
    torch_mod = sys.modules.get("torch")
    if torch_mod is not None and getattr(torch_mod, "__file__", None):
        prefixes.append(os.path.dirname(os.path.abspath(torch_mod.__file__)) + os.sep)
    return prefixes


def _is_user_file(filename):
    hit = _skip_cache.get(filename)
    if hit is not None:
        return hit
    user = True
    if filename.startswith("<"):
        user = False  # frozen modules, `python -c` (multiprocessing's spawn), exec'd text
    else:
        path = os.path.abspath(filename)
        for prefix in _skip_prefixes():
            if path.startswith(prefix) and "-packages" + os.sep not in path[len(prefix):]:
                user = False
                break
    _skip_cache[filename] = user
    return user


def user_site(frame, limit=4):
    """The program's own frames from `frame` outwards (user_stack()) as a
    key: (code, line, code, line, ...), innermost first."""
    out = []
    user_code = _user_code
    while frame is not None:
        code = frame.f_code
        user = user_code.get(code)
        if user is None:
            if code is _spawn_child_code:
                break
            user = user_code[code] = _is_user_file(code.co_filename)
        if user:
            out.append(code)
            out.append(frame.f_lineno)
            if len(out) >= 2 * limit:
                break
        frame = frame.f_back
    return tuple(out)


def user_stack(frame, limit=4):
    """The program's own frames from `frame` outwards (not torch's, collie's or
    the standard library's), innermost first: [[file, line, function], ...]."""
    return site_frames(user_site(frame, limit))


def _traceback_stack(tb, limit=8):
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    out = []
    for code, line in reversed(frames):
        if _is_user_file(code.co_filename):
            out.append([code.co_filename, line, code.co_name])
        if len(out) >= limit:
            break
    return out


# ---- how the process ends -------------------------------------------------------


def report_exception(etype, value, tb):
    """Tells the controller about an exception that ends this process's program."""
    if _proc is None or _proc.exception_sent or etype is None:
        return
    if issubclass(etype, (SystemExit, KeyboardInterrupt)):
        return
    _proc.exception_sent = True
    text = "".join(traceback.format_exception(etype, value, tb))
    l = link()
    _capture.flush_python_streams()
    with _capture.IO_LOCK:
        try:
            _ship_output(l)
            l.send({"t": "exception", "type": etype.__name__, "message": str(value), "traceback": text,
                    "where": _traceback_stack(tb)}, locked=True)
        except ControllerGone as e:
            _controller_gone(e)


def send_exit(code):
    """Says that this process's program ended (`code`: its exit code, if known)."""
    if _proc is None or _proc.exit_sent:
        return
    _proc.exit_sent = True
    _capture.flush_python_streams()
    if _proc.link is None:
        with _capture.IO_LOCK:
            if _proc.capture is not None:
                _proc.capture.drain_locked()
            quiet = _proc.capture is None or not _proc.capture.has_pending()
        if quiet:
            return  # never spoke, nothing to say: not a process of the program's world
    l = link()
    with _capture.IO_LOCK:
        try:
            _ship_output(l)
            l.send({"t": "exit", "code": code}, locked=True)
        except ControllerGone:
            pass


def _excepthook(previous):
    def hook(etype, value, tb):
        report_exception(etype, value, tb)
        previous(etype, value, tb)

    return hook


def _at_exit():
    send_exit(None)


def _patch_process(module):
    """multiprocessing's Process: its target's exception and its exit code
    (a forked child leaves with os._exit, past atexit)."""
    base = module.BaseProcess
    original = base._bootstrap

    def _bootstrap(self, parent_sentinel=None):
        run = self.run

        def run_reporting():
            try:
                return run()
            except BaseException:
                report_exception(*sys.exc_info())
                raise

        self.run = run_reporting
        code = original(self, parent_sentinel)
        send_exit(code)
        return code

    base._bootstrap = _bootstrap


def _patch_spawn(module):
    """torch.multiprocessing.spawn: _wrap puts the exception in a queue for the
    parent instead of raising it; it is reported first."""
    original = module._wrap

    def _wrap(fn, i, args, error_queue):
        def reporting(*a):
            try:
                return fn(*a)
            except Exception:
                report_exception(*sys.exc_info())
                raise

        return original(reporting, i, args, error_queue)

    _wrap.__module__ = original.__module__
    _wrap.__name__ = original.__name__
    _wrap.__qualname__ = original.__qualname__
    module._wrap = _wrap


def _patch_spawn_popen(module):
    from . import _spawn

    _spawn.install(module)


def _patch_torch_distributed(module):
    from . import _torch

    _torch.install(module)


class _Hooks(importlib.abc.MetaPathFinder):
    """Patches modules as they are imported."""

    targets = {
        "torch.distributed": _patch_torch_distributed,
        "multiprocessing.process": _patch_process,
        "torch.multiprocessing.spawn": _patch_spawn,
        "multiprocessing.popen_spawn_posix": _patch_spawn_popen,
    }

    def find_spec(self, name, path, target=None):
        hook = self.targets.get(name)
        if hook is None:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


# ---- start-up and fork -------------------------------------------------------


def _before_fork():
    _capture.IO_LOCK.acquire()


def _after_fork_parent():
    _capture.IO_LOCK.release()


def _after_fork_child():
    # Only this thread exists here; the parent's lock, connection and
    # capture thread are the parent's.
    global _proc
    _capture.IO_LOCK = threading.Lock()
    old = _proc
    if old.link is not None:
        old.link.close()  # this process's copy only: the parent keeps its connection
    capture = None
    if old.capture is not None:
        os.close(old.capture.r)
        capture = _capture.Capture() if _capture.should_capture() else None
    _proc = _Process(capture)
    from . import _torch

    _torch.forget_after_fork()


def boot():
    global _proc
    if _proc is not None:
        return
    _launcher_env()
    _proc = _Process(_capture.Capture() if _capture.should_capture() else None)
    hooks = _Hooks()
    sys.meta_path.insert(0, hooks)
    for name, hook in hooks.targets.items():
        if name in sys.modules:
            hook(sys.modules[name])
    atexit.register(_at_exit)
    sys.excepthook = _excepthook(sys.excepthook)
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)
