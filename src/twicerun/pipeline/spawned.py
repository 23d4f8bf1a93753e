"""Where a process that a step spawns finds the pipeline.

twicerun imports a pipeline under a name of its own (`_twicerun_pipeline_<stem>_<digest>`,
pipeline/loader.py), which nothing on `sys.path` provides. A `multiprocessing` pool whose
workers are new interpreters (the `spawn` start method, macOS's default, or `forkserver`,
Linux's from Python 3.14) sends each worker the step's function by that name; a worker
that cannot import it dies, the pool starts another that dies the same way, and the step
waited for ever, deaf to SIGTERM. So the name is made importable: a directory of this
process's, on `sys.path` while a step runs (a spawned worker is handed the parent's
`sys.path`), holds for each pipeline a module of that name that loads the pipeline's
file, as a spawned worker re-imports a script run as `__main__`.

A pipeline inside a package keeps its name inside the package, where this directory
cannot provide it; its spawned workers still cannot import it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

_directory: Path | None = None
# Where the directory is made: the system's temporary directory, unless a parent process
# that may have to kill this one hands a directory of its own (runner/fresh_process.py).
_parent: Path | None = None

_MODULE = """\
# Written by twicerun for the processes a step spawns: the pipeline {path!r} under the
# name twicerun imported it as. Removed when twicerun is done.
import importlib.util as _util
import sys as _sys

_spec = _util.spec_from_file_location(__name__, {path!r})
_module = _util.module_from_spec(_spec)
_sys.modules[__name__] = _module
_spec.loader.exec_module(_module)
"""


def provide(module_name: str, path: Path) -> Path | None:
    """Make `module_name` importable as the pipeline at `path` by whoever has the returned
    directory on `sys.path`; None for a name inside a package."""
    global _directory
    if "." in module_name:
        return None
    if _directory is None or not _directory.is_dir():
        if _parent is None:
            _sweep(Path(tempfile.gettempdir()))
        # The owner's pid in the name, for the sweep of a later process.
        _directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=_parent))
        # For a process that imports pipelines without the CLI around it (a test, a
        # library caller); only by this process, not by a child it forked that exits.
        atexit.register(_remove, _directory, os.getpid())
    (_directory / f"{module_name}.py").write_text(
        _MODULE.format(path=str(path.resolve())), encoding="utf-8"
    )
    return _directory


PREFIX = "twicerun-spawned-"


def _sweep(temporary: Path) -> None:
    """Remove the directories a killed twicerun left in `temporary`: a process ended by
    SIGKILL (an OOM kill, a CI job cancelled hard) runs no clean-up, and each left one
    behind. Only this user's, and only where the pid in the name is no process's: a pid
    taken again since by another process keeps its directory (until that one ends), which
    errs toward leaving one too many."""
    if not hasattr(os, "getuid"):
        return  # no owner to tell apart
    try:
        found = list(temporary.glob(f"{PREFIX}*-*"))
    except OSError:
        return
    for directory in found:
        pid = directory.name.removeprefix(PREFIX).split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if directory.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except (OSError, OverflowError):
            continue  # alive under another user (PermissionError), or not ours to read


def place_under(parent: Path) -> None:
    """Make the directory inside `parent` from now on: a process that is killed (SIGKILL
    runs no clean-up) leaves it there, for whoever removes `parent`, and not in /tmp."""
    global _parent
    _parent = parent


def _remove(directory: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def removed_at_end() -> Iterator[None]:
    """Remove the directory, if one was made, when the block ends."""
    global _directory
    try:
        yield
    finally:
        if _directory is not None:
            shutil.rmtree(_directory, ignore_errors=True)
            _directory = None
