"""What a full disk looks like, whichever layer noticed it.

Python raises OSError with ENOSPC (or EDQUOT, a quota); DuckDB raises its own IO
error and quotes the system's sentence. Either way the user's next move is the
same, so the runner and the CLI name it instead of blaming a step or printing a
traceback.
"""

from __future__ import annotations

import errno

_SENTENCES = ("No space left on device", "Disk quota exceeded")


def disk_full(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, is a full disk."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(sentence in str(error) for sentence in _SENTENCES):
            return True
        error = error.__cause__ or error.__context__
    return False


def full_disk_advice(writing: str | None = None) -> str:
    """What to do, in one sentence; `writing` names the file that did not fit, when known."""
    what = f" (writing {writing})" if writing else ""
    return (
        f"no space is left on a disk{what}; free some, or point --run-dir at a disk with "
        f"room: an invocation keeps about two runs' worth of its artifacts at once, plus "
        f"the amplified inputs while an amplifier runs"
    )
