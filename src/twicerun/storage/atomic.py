"""Writes that a reader can never see half of: a temporary name, then a rename.

A temporary file lives beside its final name (so the rename never crosses a
filesystem), starts with a dot and carries a random suffix, and is removed
on any failure, Ctrl-C included.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TEMPORARY_MARK = ".tmp-"


@contextlib.contextmanager
def atomic_path(final: Path, *, fsync: bool = True, keep_mode: bool = False) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces `final` in one step.

    With `keep_mode`, a file that already exists keeps its permission bits, and a
    symbolic link keeps being one: the file it points to is what gets replaced.
    """
    final = Path(final)
    mode = None
    if keep_mode and final.exists():
        final = final.resolve()
        mode = final.stat().st_mode & 0o7777
    if not final.parent.is_dir():  # one stat; mkdir(exist_ok) on an existing one costs two
        final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}")
    try:
        yield temporary
        if fsync:
            _fsync(temporary)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def write_bytes_atomic(
    final: Path, data: bytes, *, fsync: bool = True, keep_mode: bool = False
) -> None:
    with atomic_path(final, fsync=fsync, keep_mode=keep_mode) as temporary:
        temporary.write_bytes(data)


def write_json_atomic(
    final: Path, document: Any, *, fsync: bool = True, compact: bool = False
) -> None:
    """`compact` for files only a program reads: one line, by json's C encoder, where
    indentation would route every write through its pure-Python one."""
    indent = None if compact else 2
    text = json.dumps(document, indent=indent, sort_keys=False, ensure_ascii=False) + "\n"
    write_bytes_atomic(final, text.encode("utf-8"), fsync=fsync)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def is_temporary(path: Path) -> bool:
    return Path(path).name.startswith(".") and TEMPORARY_MARK in Path(path).name


def _fsync(path: Path) -> None:
    if not path.exists():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
