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
def atomic_path(final: Path, *, fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces `final` in one step."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}")
    try:
        yield temporary
        if fsync:
            _fsync(temporary)
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def write_bytes_atomic(final: Path, data: bytes, *, fsync: bool = True) -> None:
    with atomic_path(final, fsync=fsync) as temporary:
        temporary.write_bytes(data)


def write_json_atomic(final: Path, document: Any, *, fsync: bool = True) -> None:
    text = json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
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
