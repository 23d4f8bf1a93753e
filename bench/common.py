"""What every bench records about the instrument it ran on."""

from __future__ import annotations

from dataclasses import asdict


def environment(threads: int) -> dict:
    from twicerun.runner.environment import stamp

    return asdict(stamp(threads))
