"""multiprocessing's "spawn" start method without a second `import torch`.

A spawned child (mp.set_start_method("spawn"), torch.multiprocessing.spawn)
is a fresh interpreter that imports the program's main module again -- and
with it torch, 1.5 s of CPU per child on this kind of machine, most of a
small program's run. Here the child is forked from the process that starts
it instead, and then does exactly what a spawned child does
(multiprocessing.spawn._main): it reads the preparation data and the
pickled Process from the same pipe, imports the main module afresh as
__mp_main__ (its __main__ is replaced by an empty module first, so the
parent's half-run one is not reused), and runs the target. What it sees
that a spawned child would not: modules the parent had imported are
imported already (as they would be once the main module is imported
again), and their state is the parent's at start() -- except torch's
random generator, which is reseeded from the OS as a fresh process's is
(Python's `random` reseeds itself after a fork).

Used only where forking is safe: the starting thread is the main thread
and the process runs no threads but collie's output thread (a thread pool
that torch or OpenMP started, or the program's own threads, would not
exist in the child); otherwise, and with COLLIE_SPAWN=exec, the child is
spawned as usual. The child leaves as a forked child does (os._exit after
the Process ends: atexit handlers are not run; its exit is reported to
the controller by the Process patch, __init__._patch_process).
"""

import os
import sys
import types

SPAWN_ENV = "COLLIE_SPAWN"


def _only_thread_besides_output():
    """Whether this process's threads are the calling (main) thread and at
    most collie's output thread."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        return False
    ours = sum(1 for t in threading.enumerate() if t.name == "collie-output" and t.is_alive())
    return tasks <= 1 + ours


def _child(child_r):
    """In the forked child: what multiprocessing.spawn.spawn_main does."""
    code = 1
    try:
        from multiprocessing import spawn

        import collie_script

        collie_script._spawn_child_code = _child.__code__  # where its own stack starts

        sys.modules["__main__"] = types.ModuleType("__main__")  # imported again from its path, as spawned
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.seed()
        code = spawn._main(child_r, os.dup(child_r))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 -- reported as a spawned child's would be, then it exits
        sys.excepthook(*sys.exc_info())
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def install(module):
    """Replaces multiprocessing.popen_spawn_posix.Popen (SpawnProcess looks it
    up at each start)."""
    if os.environ.get(SPAWN_ENV, "") == "exec" or not hasattr(os, "fork"):
        return
    import io

    from multiprocessing import reduction, resource_tracker, spawn, util
    from multiprocessing.context import set_spawning_popen

    base = module.Popen

    class Popen(base):
        def _launch(self, process_obj):
            if not _only_thread_besides_output():
                return super()._launch(process_obj)
            # multiprocessing.popen_spawn_posix.Popen._launch, forking where it
            # spawns.
            tracker_fd = resource_tracker.getfd()
            self._fds.append(tracker_fd)
            prep_data = spawn.get_preparation_data(process_obj._name)
            fp = io.BytesIO()
            set_spawning_popen(self)
            try:
                reduction.dump(prep_data, fp)
                reduction.dump(process_obj, fp)
            finally:
                set_spawning_popen(None)
            parent_r = child_w = child_r = parent_w = None
            try:
                parent_r, child_w = os.pipe()
                child_r, parent_w = os.pipe()
                self._fds.extend([child_r, child_w])
                pid = os.fork()
                if pid == 0:
                    os.close(parent_r)
                    os.close(parent_w)
                    resource_tracker._resource_tracker._fd = tracker_fd
                    _child(child_r)
                self.pid = pid
                self.sentinel = parent_r
                with open(parent_w, "wb", closefd=False) as f:
                    f.write(fp.getbuffer())
            finally:
                fds_to_close = [fd for fd in (parent_r, parent_w) if fd is not None]
                self.finalizer = util.Finalize(self, util.close_fds, fds_to_close)
                for fd in (child_r, child_w):
                    if fd is not None:
                        os.close(fd)

    Popen.__module__ = base.__module__
    Popen.__qualname__ = base.__qualname__
    module.Popen = Popen
