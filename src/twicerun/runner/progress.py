"""Progress events: the runner says where it is, and only the CLI decides to show it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    phase: str
    run: int
    runs: int
    step_index: int
    steps: int
    step_name: str


Progress = Callable[[ProgressEvent], None]


def silent(_: ProgressEvent) -> None:
    return None
