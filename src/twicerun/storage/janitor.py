"""Deleting files, and writing receipts, off the critical path.

Removing a large file costs the kernel real time, and so, on a slow disk, does
creating a small one. Artifacts that are no longer needed (a later run's copy
identical to run 1's, a series' outputs once compared) and receipts are handed
to one helper thread, in order, and `wait` is called before anything measures
the disk or the invocation ends.

One thread and one queue keep the order the runner relies on: a receipt that
stops pointing at an artifact is on disk before that artifact is deleted.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from twicerun.storage.atomic import write_bytes_atomic


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _rmtree(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


class Janitor:
    def __init__(self) -> None:
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="twicerun-janitor")
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self._writes: dict[Path, Callable[[], bytes]] = {}

    def remove(self, path: Path) -> None:
        self._pending.append(self._helper.submit(_unlink, Path(path)))

    def remove_tree(self, path: Path) -> None:
        self._pending.append(self._helper.submit(_rmtree, Path(path)))

    def write(self, path: Path, render: Callable[[], bytes]) -> None:
        """Write `render()` to `path` atomically (not fsynced), after everything queued so far.

        A receipt is rewritten as a step's copies are compared and pruned, often before
        its first version reached the disk; a newer version of a path still waiting
        takes the older one's place in the queue, so only the newest is written."""
        path = Path(path)
        with self._lock:
            waiting = path in self._writes
            self._writes[path] = render
        if not waiting:
            self._pending.append(self._helper.submit(self._write, path))

    def _write(self, path: Path) -> None:
        with self._lock:
            render = self._writes.pop(path)
        write_bytes_atomic(path, render(), fsync=False)

    def wait(self) -> None:
        """Block until everything queued is done; the first failure is raised."""
        pending, self._pending = self._pending, []
        failure = None
        for future in pending:
            exc = future.exception()
            if exc is not None and failure is None:
                failure = exc
        if failure is not None:
            raise failure

    def shutdown(self) -> None:
        try:
            self.wait()
        finally:
            self._helper.shutdown(wait=True)


def remove_now(path: Path) -> None:
    """For callers without a janitor: delete at once."""
    _unlink(Path(path))
