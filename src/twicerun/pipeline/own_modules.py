"""The modules a pipeline imports from its own directory, kept to that pipeline.

A pipeline beside a `helpers.py` imports it as `python pipeline.py` would: its directory
is first on `sys.path` while it is imported. Python then files the module as `helpers`
in `sys.modules` for the whole process, and a second pipeline of the same invocation
(the gate and `baseline update` run every pipeline in one process) that imports its own
`helpers` got the first one's, and ran its code without a word. And once the directory
left `sys.path`, a step that imported a helper inside its body raised
ModuleNotFoundError.

So each pipeline keeps what it imported from its directory, and those modules are in
`sys.modules`, with the directory on `sys.path`, only while it is imported and while
one of its steps runs. What is installed (anything found through another `sys.path`
entry, a virtualenv under the directory included) is shared as Python shares it.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType


class OwnModules:
    """A pipeline's directory and the modules it has imported from there so far."""

    def __init__(self, directory: Path):
        self.directory = directory.resolve()
        self._modules: dict[str, ModuleType] = {}
        self._digests: dict[str, str] = {}

    def digests(self) -> dict[str, str]:
        """What the pipeline imported from its directory so far: each module's file, relative
        to the directory, with the SHA-256 of the file as it was when it was imported. Part
        of a step's code, which a receipt records, since a step may call into any of them."""
        return dict(sorted(self._digests.items()))

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The directory first on `sys.path` and this pipeline's modules in `sys.modules`;
        afterwards, whatever it imported from the directory is taken back out."""
        entry = str(self.directory)
        displaced = {name: sys.modules[name] for name in self._modules if name in sys.modules}
        sys.modules.update(self._modules)
        before = set(sys.modules)
        sys.path.insert(0, entry)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)
            for name in set(sys.modules) - before:
                module = sys.modules[name]
                if self._imported_from_here(name, module):
                    self._modules[name] = module
                    self._digests[self.relative(module.__file__)] = file_digest(
                        Path(module.__file__)
                    )
            for name in self._modules:
                sys.modules.pop(name, None)
            sys.modules.update(displaced)

    def relative(self, file: str) -> str:
        return Path(file).resolve().relative_to(self.directory).as_posix()

    def _imported_from_here(self, name: str, module: ModuleType) -> bool:
        """Whether `name` was found through this directory: its file is the directory's
        `top.py` (or `top.<abi>.so`) or lies in its package `top/`."""
        file = getattr(module, "__file__", None)
        if not file:
            return False
        try:
            first = Path(file).resolve().relative_to(self.directory).parts[0]
        except (ValueError, IndexError, OSError):
            return False
        top = name.partition(".")[0]
        return first == top or first.startswith(f"{top}.")


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes; "" when it cannot be read (then it cannot match)."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return ""
