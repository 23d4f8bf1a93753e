"""Whether the process that started an invocation is still the one alive under its pid.

A pid alone is not enough: process and thread ids share one counter, which wraps
(at 32,768 by default on Linux, and every DuckDB connection starts threads), so by
the time a later invocation looks, the pid of one killed earlier may belong to
another process or thread, and a signal-0 probe says "alive" for as long as that
one lives. Where /proc is there, the start time of the process (clock ticks since
boot) is recorded beside the pid and must match too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the name (field 3 onwards); empty where /proc
    cannot say."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    # The name in field 2 may hold spaces and parentheses; the fields after it do not.
    return text[text.rfind(")") + 2 :].split()


def started(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot, or None where /proc cannot say."""
    fields = _stat(pid)
    try:
        return int(fields[19])  # field 22, starttime
    except (IndexError, ValueError):
        return None


def _exited(pid: int) -> bool:
    """Whether `pid` has exited and only waits to be collected by its parent (a zombie).
    A signal-0 probe still finds it, and a container whose first process collects no
    orphans keeps it so for good: a killed invocation then stayed `running` forever."""
    fields = _stat(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def alive(pid: object, start: object = None) -> bool:
    """Whether `pid` is alive and, when its start time was recorded, still that process."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if sys.platform == "win32":
        # os.kill(pid, 0) there is no probe: it ends the process. Alive, as far as anyone
        # here can tell safely, so nothing is reaped.
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive, but it may still be a newer one
    if _exited(pid):
        return False
    if isinstance(start, int):
        now = started(pid)
        if now is not None and now != start:
            return False
    return True
