"""What one execution of one step left behind: its receipt.

A receipt is written once the step's artifacts are on disk and their digests
are known. It is what a later command reads instead of re-reading rows: the
artifact names, row counts and schemas, both digests, what the step read and
from which run, how long it took and how it ended.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from twicerun.storage.atomic import read_json, write_json_atomic

RECEIPT_NAME = "receipt.json"


@dataclass(frozen=True)
class ArtifactRecord:
    """One artifact a step wrote, with both digests.

    `file` is relative to the invocation directory. When `kept` is false the
    file was removed because its canonical digest equals run 1's, and any
    reader of it is sent to `same_as` (run 1's copy) instead.
    """

    name: str
    file: str
    rows: int
    schema: list[list[str]]
    bytes_digest: str
    canonical_digest: str
    kept: bool = True
    same_as: str | None = None


@dataclass(frozen=True)
class ReadRecord:
    """One artifact a step read: by `ctx.read`, or as its own earlier state by `ctx.state`."""

    name: str
    via: str
    run: str | None
    step_index: int | None
    rows: int


@dataclass(frozen=True)
class Receipt:
    series: str
    run: int
    step_index: int
    step_name: str
    threads: int
    seconds: float
    outcome: str
    artifacts: list[ArtifactRecord] = field(default_factory=list)
    reads: list[ReadRecord] = field(default_factory=list)
    error: str | None = None
    seed: int | None = None
    sql_outside_ctx: list[str] = field(default_factory=list)

    @property
    def rows_read(self) -> int:
        return sum(r.rows for r in self.reads)

    def artifact(self, name: str) -> ArtifactRecord | None:
        for a in self.artifacts:
            if a.name == name:
                return a
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows_read"] = self.rows_read
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Receipt:
        d = dict(d)
        d.pop("rows_read", None)
        d["artifacts"] = [ArtifactRecord(**a) for a in d.get("artifacts", [])]
        d["reads"] = [ReadRecord(**r) for r in d.get("reads", [])]
        return cls(**d)


def save_receipt(step_dir: Path, receipt: Receipt) -> None:
    # Atomic but not fsynced: one per step per run, and a power cut costs a rerun.
    write_json_atomic(Path(step_dir) / RECEIPT_NAME, receipt.to_dict(), fsync=False)


def load_receipt(step_dir: Path) -> Receipt | None:
    path = Path(step_dir) / RECEIPT_NAME
    if not path.exists():
        return None
    return Receipt.from_dict(read_json(path))
