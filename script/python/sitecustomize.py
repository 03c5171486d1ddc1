"""collie's hook into every Python process of a `collie run -- COMMAND` run.

`collie run` puts this folder first on PYTHONPATH for the run only; nothing
is installed into the user's Python. Python imports `sitecustomize` at
start-up, so every Python process the command starts (the script, the
processes it spawns with torch.multiprocessing, those `-n N` starts) boots
collie_script, which makes torch.distributed's process groups collie's.
Outside a collie run (no COLLIE_SCRIPT_CONTROLLER) it does nothing.

The sitecustomize this one shadows (Debian's, a virtualenv's) still runs:
it is looked up on the rest of sys.path and executed afterwards.
"""

import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if os.environ.get("COLLIE_SCRIPT_CONTROLLER"):
    try:
        import collie_script

        collie_script.boot()
    except Exception as e:  # noqa: BLE001 -- a broken hook must say so, not kill the program silently
        sys.stderr.write("collie: the script hook failed to start: %s: %s\n" % (type(e).__name__, e))
try:
    _chain()
except Exception:  # noqa: BLE001 -- the shadowed hook's own failure is not collie's to report
    pass
