"""Deleting files off the critical path.

Removing a large file costs the kernel real time. Artifacts that are no
longer needed (a later run's copy identical to run 1's, a series' outputs
once compared) are handed to one helper thread, and `wait` is called before
anything measures the disk or the invocation ends.

Receipts are not written here: writing them beside the next step was measured
to lower how often the loop caught a sparse tie race (docs/runs.md).
"""

from __future__ import annotations

import contextlib
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path


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

    def remove(self, path: Path) -> None:
        self._pending.append(self._helper.submit(_unlink, Path(path)))

    def remove_tree(self, path: Path) -> None:
        self._pending.append(self._helper.submit(_rmtree, Path(path)))

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
