"""Where the baseline a pull request is judged against comes from.

By default the base branch's copy, read through git, so a pull request cannot edit
the numbers it is graded on. The pull request's own copy is used only when asked,
and either way, when the two differ, the check says what moved.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from twicerun.github.baseline import Baseline, BaselineError, load, parse, what_moved
from twicerun.vocabulary.gate import BASE_BRANCH, PULL_REQUEST, WORKING_TREE


class NotOnRef(BaselineError):
    """The base branch has no baseline file at that path (yet)."""


@dataclass(frozen=True)
class Chosen:
    baseline: Baseline | None
    source: str
    error: str | None
    moved: list[str]


def read_at(ref: str, path: Path) -> str:
    """The file `path` (relative to the working directory) as it is at `ref`."""
    spec = f"{ref}:./{Path(path).as_posix().removeprefix('./')}"
    try:
        done = subprocess.run(["git", "show", spec], capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BaselineError(f"cannot run git to read the baseline at {ref} ({exc})") from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        if reason and ("does not exist" in reason[-1] or "but not in" in reason[-1]):
            raise NotOnRef(
                f"the base branch ({ref}) has no baseline at {path}; commit one there first "
                f"(twicerun baseline update), or judge against this pull request's copy with "
                f"--baseline-source pull-request"
            )
        raise BaselineError(
            f"cannot read {path} at {ref} ({reason[-1] if reason else 'git failed'}); fetch "
            f"the base branch first (git fetch origin {ref.removeprefix('origin/')}), or judge "
            f"against this checkout's copy with --baseline-source pull-request"
        )
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path} at {ref} is not UTF-8 text") from exc


def choose(path: Path, *, source: str, ref: str | None, create_command: str) -> Chosen:
    """The baseline to judge against, where it came from, and what the pull request moved.

    `source` is "base" or "pull-request". With "base" and a `ref`, the copy at `ref`
    is used; with "base" and no ref (not a pull request), the working tree's.
    """
    mine: Baseline | None = None
    mine_error: str | None = None
    try:
        mine = load(path, create_command)
    except BaselineError as exc:
        mine_error = str(exc)
    if ref is None:
        return Chosen(mine, WORKING_TREE, mine_error, [])
    base: Baseline | None = None
    base_error: str | None = None
    absent_on_base = False
    try:
        base = parse(read_at(ref, path), f"{path} at {ref}", create_command)
    except NotOnRef as exc:
        base_error, absent_on_base = str(exc), True
    except BaselineError as exc:
        base_error = str(exc)
    moved: list[str] = []
    if base is not None and mine is not None and base != mine:
        moved = what_moved(base, mine)
    elif base is not None and mine is None:
        moved = ["the pull request deletes or breaks the baseline file"]
    elif absent_on_base and mine is not None:
        moved = ["the pull request adds the baseline file"]
    if source == "pull-request":
        return Chosen(mine, PULL_REQUEST, mine_error, moved)
    return Chosen(base, BASE_BRANCH, base_error, moved)
