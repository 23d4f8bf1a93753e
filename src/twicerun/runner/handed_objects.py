"""Which artifacts an execution wrote from the very object an earlier execution of the
same step wrote.

`ctx.write(name, table)` takes a pyarrow Table or a DataFrame. A step that keeps one
in a module-level memo and hands it over again in every run after the first did not
compute its answer in those runs, and the loop's agreeing, or an amplifier's, says
nothing about its inputs. The same object alive under the same identity is proof of
that, with no guess about the step's code; copies, or equal rows built afresh, are not
counted. Only weak references are kept, so nothing here holds a step's data alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

# (invocation directory, step index, artifact name) -> what earlier executions wrote it from
_EARLIER: dict[tuple[str, int, str], list[weakref.ref]] = {}


def reused(invocation: str, step_index: int, objects: Mapping[str, weakref.ref]) -> list[str]:
    """The names in `objects` written from an object an earlier execution of this step,
    in this invocation, wrote too; the rest are remembered for the executions after."""
    again = []
    for name, ref in objects.items():
        now = ref()
        if now is None:
            continue
        earlier = _EARLIER.setdefault((invocation, step_index, name), [])
        earlier[:] = [r for r in earlier if r() is not None]
        if any(r() is now for r in earlier):
            again.append(name)
        else:
            earlier.append(ref)
    return sorted(again)
