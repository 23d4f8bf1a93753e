"""The process-wide random generators a step may draw from without saying so.

Python's `random` module, numpy's legacy global generator where numpy is loaded, and a
`random.Random` the pipeline's file makes at import are each one stream for the whole
process: a step that draws from one without seeding it continues where the previous
execution left off, so its runs see other numbers, at any thread count. Whether a step
did that is a fact twicerun can read off the generators themselves: the state an
execution leaves them in. A step that seeds them leaves the same state in every run; one
that draws unseeded leaves another each time.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterable, Mapping
from typing import Any

_PYTHON = "Python's random module"
_NUMPY = "numpy's global generator"


def named_generators(values: Iterable[tuple[str, Any]]) -> dict[str, random.Random]:
    """The `random.Random` instances among the values a step's code names (its file's
    globals, and those of the file's functions it calls), by how a report names them. A
    generator made at import (`RNG = random.Random(7)`) is one stream for the whole
    process as the module's is, and a step drawing from it got no note: its runs
    differed at any thread count with nothing said why. A SystemRandom has no state to
    read (it draws from the operating system each time), so it is left out."""
    return {
        f"the generator {name} (a random.Random)": value
        for name, value in values
        if isinstance(value, random.Random) and not isinstance(value, random.SystemRandom)
    }


def generator_states(named: Mapping[str, random.Random] | None = None) -> dict[str, Any]:
    """The state of every global generator loaded, and of each generator in `named`
    (`named_generators`), cheap to take and compare (a few µs each)."""
    states: dict[str, Any] = {_PYTHON: random.getstate()}
    for label, generator in (named or {}).items():
        try:
            states[label] = generator.getstate()
        except Exception:  # a subclass whose state cannot be read: nothing to compare
            continue
    legacy = sys.modules.get("numpy.random")
    if legacy is not None:
        try:
            kind, keys, position, *_ = legacy.get_state()
            states[_NUMPY] = (kind, keys.tobytes(), position)
        except Exception:  # a numpy too old or too new for this: read what can be read
            pass
    return states


def left_in(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The generators the execution drew from and a digest of the state it left them in,
    as `names:digest`; None when it drew from none."""
    moved = sorted(name for name, state in after.items() if before.get(name) != state)
    if not moved:
        return None
    digest = hashlib.sha256(repr([after[n] for n in moved]).encode()).hexdigest()[:16]
    return f"{' and '.join(moved)}:{digest}"


def drew_unseeded(states: list[str | None]) -> str | None:
    """The generators a step drew from without seeding them, when its executions left them
    in states of their own (a seeded step leaves the same state each time); else None."""
    drawn = [s for s in states if s is not None]
    if len(drawn) < 2 or len(set(drawn)) == 1:
        return None
    return drawn[0].rpartition(":")[0]
