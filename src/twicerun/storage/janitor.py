"""Deleting files off the critical path.

Removing a large file costs the kernel real time. Artifacts that are no
longer needed (a later run's copy identical to run 1's, a series' outputs
once compared) are handed to one helper thread, and `wait` is called before
anything measures the disk or the invocation ends.
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
        for future in self._pending:
            future.result()
        self._pending.clear()

    def shutdown(self) -> None:
        self.wait()
        self._helper.shutdown(wait=True)


def remove_now(path: Path) -> None:
    """For callers without a janitor: delete at once."""
    _unlink(Path(path))
