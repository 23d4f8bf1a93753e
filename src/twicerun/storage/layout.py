"""Where everything an invocation writes lives on disk.

    <run-dir>/<invocation>/
        invocation.json                      the manifest: stamps and outcome
        result.json                          the Result, once the invocation finished
        <series>/<run>/<NN>-<step>/          one directory per step per run
            <artifact>.parquet
            receipt.json
        spill/                               DuckDB's temporary directory

A series is a family of runs: `loop` for the main loop (run 1 is the
reference), and later the bisect and the amplifiers. Artifacts are addressed
by (series, run, step index, name).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twicerun.errors import UsageError
from twicerun.storage.atomic import read_json, write_bytes_atomic, write_json_atomic
from twicerun.storage.processes import started
from twicerun.storage.receipts import ArtifactRecord, Receipt, load_receipt

MANIFEST_NAME = "invocation.json"
RESULT_NAME = "result.json"
LOOP = "loop"
MANIFEST_SCHEMA = "twicerun.invocation/1"
# How an invocation directory is named (_new_directory_in): the start, to the second, then a
# random suffix; so names sort by when they started, to the second.
INVOCATION_NAME = re.compile(r"(\d{8}-\d{6})-[0-9a-f]+")

RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
# A "running" invocation whose process is gone: set by the next invocation, never
# by the one that died.
KILLED = "killed"
INTERRUPTED = "interrupted"


def step_dir_name(index: int, name: str) -> str:
    return f"{index:02d}-{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


GITIGNORE = ".gitignore"


def ignore_everything(run_dir: Path) -> None:
    """Keep a run directory out of version control, as pytest and ruff keep their caches:
    a `git add -A` in a repository where twicerun ran would otherwise commit every
    invocation's Parquet. Written only into a directory twicerun made (or its default
    `.twicerun`), never into a directory a user named that existed before."""
    text = "# Invocation directories written by twicerun: not for version control.\n*\n"
    write_bytes_atomic(run_dir / GITIGNORE, text.encode("utf-8"), fsync=False)


@dataclass(frozen=True)
class RunAddress:
    """One run of one series, as `loop/1`."""

    series: str
    run: int

    def __str__(self) -> str:
        return f"{self.series}/{self.run}"

    @classmethod
    def parse(cls, text: str) -> RunAddress:
        series, _, run = text.rpartition("/")
        return cls(series, int(run))


# Why a run directory cannot be made where it was asked for: no permission, a read-only
# file system, a path through something that is not a directory, or under /proc.
_CANNOT_WRITE_HERE = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.ENOENT}
)


def _new_directory_in(run_dir: Path) -> Path:
    """A directory of its own for one invocation, named by the time and a random suffix,
    created exclusively, in `run_dir` (made, and told to ignore itself, if need be)."""
    try:
        run_dir.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
    if created or (run_dir.name == ".twicerun" and not (run_dir / GITIGNORE).exists()):
        ignore_everything(run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    while True:
        root = run_dir / f"{stamp}-{secrets.token_hex(2)}"
        try:
            root.mkdir()
            return root
        except FileExistsError:
            continue


class Invocation:
    """One invocation's directory, and the only code that knows its layout."""

    def __init__(self, root: Path):
        self.root = Path(root)
        # Where the process stood when the invocation began: a step that changes
        # directory is put back here after it returns (runner/execute.py).
        self.working_directory = os.getcwd()

    @classmethod
    def create(cls, run_dir: Path, manifest: dict[str, Any]) -> Invocation:
        run_dir = Path(run_dir)
        try:
            root = _new_directory_in(run_dir)
        except OSError as exc:
            if exc.errno not in _CANNOT_WRITE_HERE:
                raise  # a full disk is reported as one, by the CLI
            raise UsageError(
                f"cannot create an invocation directory in {run_dir} "
                f"({exc.strerror or exc}); run twicerun where it may write, or name a "
                f"writable directory with --run-dir"
            ) from exc
        invocation = cls(root)
        invocation.write_manifest(
            {
                "schema": MANIFEST_SCHEMA,
                "outcome": RUNNING,
                "pid": os.getpid(),
                "pid_started": started(os.getpid()),
                "host": socket.gethostname(),
                "started": time.time(),
                **manifest,
            }
        )
        return invocation

    @property
    def id(self) -> str:
        return self.root.name

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def result_path(self) -> Path:
        return self.root / RESULT_NAME

    @property
    def spill_dir(self) -> Path:
        return self.root / "spill"

    def manifest(self) -> dict[str, Any]:
        return read_json(self.manifest_path)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def update_manifest(self, **changes: Any) -> None:
        manifest = self.manifest()
        manifest.update(changes)
        self.write_manifest(manifest)

    def finish(self, outcome: str, **changes: Any) -> None:
        self.update_manifest(outcome=outcome, finished=time.time(), **changes)

    def step_dir(self, address: RunAddress, index: int, name: str) -> Path:
        return self.root / address.series / str(address.run) / step_dir_name(index, name)

    def receipt_at(self, address: RunAddress, index: int) -> Receipt | None:
        """The receipt of step `index` in one run, found by position (a recorded run's
        reader need not know the step's name); None when there is none or it cannot be
        read."""
        run = self.root / address.series / str(address.run)
        for step in run.glob(f"{index:02d}-*"):
            try:
                return load_receipt(step)
            except (OSError, ValueError, TypeError, KeyError):
                return None
        return None

    def receipts(self, address: RunAddress) -> list[Receipt]:
        """Every step receipt of one run, in step order; [] when the run has none."""
        run = self.root / address.series / str(address.run)
        if not run.is_dir():
            return []
        found = (load_receipt(step) for step in sorted(run.iterdir()) if step.is_dir())
        return [r for r in found if r is not None]

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))

    def absolute(self, relative: str) -> Path:
        return self.root / relative

    def disk_bytes(self) -> int:
        total = 0
        for dirpath, _, files in os.walk(self.root):
            for f in files:
                with contextlib.suppress(FileNotFoundError):
                    total += os.lstat(os.path.join(dirpath, f)).st_size
        return total


def a_file_given_for_a_run(path: Path, wanted: str) -> str:
    """The refusal for a file named where a recorded invocation belongs (`wanted` says what
    the verb takes): most often the pipeline itself, given as if the verb ran it."""
    runs_it = f"; to run the pipeline, `twicerun run {path}`" if path.suffix == ".py" else ""
    return f"{path} is a file, not {wanted}; give the directory `twicerun run` printed{runs_it}"


def find_invocations(run_dir: Path) -> list[Invocation]:
    """Every invocation directory under `run_dir`, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [Invocation(p) for p in run_dir.iterdir() if (p / MANIFEST_NAME).is_file()]
    # By when they started: names carry whole seconds and then a random suffix, so two
    # invocations in one second would otherwise be ordered by chance.
    return sorted(found, key=lambda i: (_started(i), i.root.name))


def invocations_with(run_dir: Path, *outcomes: str) -> list[tuple[Invocation, dict[str, Any]]]:
    """The invocations under `run_dir` whose manifest says one of `outcomes`, oldest first,
    each with its manifest. One whose manifest cannot be read is nobody's to judge: skipped."""
    found = []
    for invocation in find_invocations(run_dir):
        try:
            manifest = invocation.manifest()
        except (OSError, ValueError):
            continue
        if manifest.get("outcome") in outcomes:
            found.append((invocation, manifest))
    return found


def _started(invocation: Invocation) -> float:
    try:
        return float(invocation.manifest()["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return float("-inf")


def follow(
    get: Callable[[RunAddress, int], Receipt | None], address: RunAddress, index: int, name: str
) -> tuple[RunAddress, Receipt, ArtifactRecord] | None:
    """The run, receipt and record that hold the rows of (address, step `index`, `name`).

    A copy pruned as identical to another run's leads to that run's (`same_as`), as
    often as it takes. A copy discarded after it was compared comes back as its own
    record, not kept and with no `same_as`: its findings remain, its rows do not.
    None when there is no such receipt or artifact. `get` is where receipts come
    from: the loop's in-memory records, or the files of a recorded invocation.
    """
    seen = set()
    while True:
        receipt = get(address, index)
        record = receipt.artifact(name) if receipt else None
        if receipt is None or record is None:
            return None
        if record.kept or record.same_as is None or address in seen:
            return address, receipt, record
        seen.add(address)
        address = RunAddress.parse(record.same_as)
