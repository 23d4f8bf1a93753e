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

A pipeline inside a package (`etl/daily.py` beside `etl/__init__.py`) imports its
package's modules as `python -m etl.daily` would (`from etl.common import q`, or
`from .common import q`): the first directory above it that is no package (the package's
root) is on `sys.path` too, after the pipeline's own, and what it finds there is the
pipeline's own as well. Before, both forms raised ModuleNotFoundError, and the advice was
to pip install the team's own package.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType


class OwnModules:
    """A pipeline's directory and the modules it has imported from there so far."""

    def __init__(self, directory: Path):
        self.directory = directory.resolve()
        self.package, self.root = package_of(self.directory)
        self._modules: dict[str, ModuleType] = {}
        self._digests: dict[str, str] = {}
        # The pipeline file itself, once imported (under a name only this process knows).
        self.pipeline: ModuleType | None = None
        # Where a process a step spawns finds the pipeline by that name (pipeline/spawned.py).
        self.spawned: Path | None = None

    def digests(self) -> dict[str, str]:
        """What the pipeline imported from its directory so far: each module's file, relative
        to the directory, with the SHA-256 of the file as it was when it was imported. Part
        of a step's code, which a receipt records, since a step may call into any of them."""
        return dict(sorted(self._digests.items()))

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The directory first on `sys.path` and this pipeline's modules in `sys.modules`;
        afterwards, whatever it imported from the directory is taken back out."""
        entries = [str(d) for d in self.directories]
        if self.spawned is not None:
            entries.append(str(self.spawned))
        displaced = {name: sys.modules[name] for name in self._modules if name in sys.modules}
        sys.modules.update(self._modules)
        before = set(sys.modules)
        sys.path[0:0] = entries
        by_value = _by_value([*self._modules.values(), *filter(None, [self.pipeline])])
        later = _ByValueOnImport.install(self.directories, by_value)
        try:
            yield
        finally:
            later.close()
            by_value.close()
            for entry in entries:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)
            for name in set(sys.modules) - before:
                module = sys.modules[name]
                found = self._found_here(name, module)
                if found is not None:
                    self._modules[name] = module
                    # Relative to the pipeline's directory: `../common.py` for its package's.
                    relative = Path(os.path.relpath(found, self.directory)).as_posix()
                    self._digests[relative] = file_digest(found)
            for name in self._modules:
                sys.modules.pop(name, None)
            sys.modules.update(displaced)

    @property
    def directories(self) -> tuple[Path, ...]:
        """Where the pipeline's own modules are found: its directory, then its package's
        root when it lies in a package."""
        return (self.directory,) if self.root is None else (self.directory, self.root)

    def _found_here(self, name: str, module: ModuleType) -> Path | None:
        return found_in_any(self.directories, name, getattr(module, "__file__", None))


def package_of(directory: Path) -> tuple[str, Path | None]:
    """The dotted package a directory is (`etl.jobs` for `root/etl/jobs`, each holding an
    `__init__.py`) and the first directory above it that is no package; ("", None) for a
    directory that is no package."""
    parts: list[str] = []
    at = directory
    while (at / "__init__.py").is_file() and at.parent != at and at.name.isidentifier():
        parts.append(at.name)
        at = at.parent
    return (".".join(reversed(parts)), at) if parts else ("", None)


def found_in_any(directories: tuple[Path, ...], name: str, file: str | None) -> Path | None:
    """The module's file when `name` was found through one of `directories` (below)."""
    for directory in directories:
        relative = found_in(directory, name, file)
        if relative is not None:
            return directory / relative
    return None


def found_in(directory: Path, name: str, file: str | None) -> str | None:
    """The module's file relative to `directory` when `name` was found through it (the file
    is the directory's `top.py`, `top.<abi>.so`, or lies in its package `top/`); None
    otherwise, a virtualenv under the directory included."""
    if not file:
        return None
    try:
        relative = Path(file).resolve().relative_to(directory)
    except (ValueError, OSError):
        return None
    top = name.partition(".")[0]
    first = relative.parts[0] if relative.parts else ""
    return relative.as_posix() if first == top or first.startswith(f"{top}.") else None


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes; "" when it cannot be read (then it cannot match)."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return ""


def _spark_pickler():
    return sys.modules.get("pyspark.cloudpickle")


def _by_value(modules) -> contextlib.ExitStack:
    """Spark's Python workers are other processes, which cannot import the pipeline file
    (twicerun imports it under a name of its own) and do not have its directory on their
    path: a UDF defined in the pipeline, pickled as a reference to its module, raised
    ModuleNotFoundError on them, and so did one from `helpers.py` beside it unless twicerun
    ran from that very directory. While a step runs, the pipeline and its own modules are
    pickled by value instead, as Spark's cloudpickle offers, so the workers need not import
    them (nor find another pipeline's module of the same name). Only where Spark is
    already loaded: DuckDB never pickles."""
    stack = contextlib.ExitStack()
    if _spark_pickler() is None:
        return stack
    for module in modules:
        _register_by_value(module, stack)
    return stack


def _register_by_value(module: ModuleType, stack: contextlib.ExitStack) -> None:
    cloudpickle = _spark_pickler()
    if cloudpickle is None or module.__name__ in cloudpickle.list_registry_pickle_by_value():
        return
    cloudpickle.register_pickle_by_value(module)
    stack.callback(cloudpickle.unregister_pickle_by_value, module)


class _ByValueOnImport:
    """A module the pipeline's directory holds that a step imports for the first time in its
    body (`from helpers import shout` inside the function), registered to be pickled by value
    as soon as it has loaded: it was not among the modules `_by_value` knew of when the step
    began, so a UDF from it raised ModuleNotFoundError on Spark's workers, unless twicerun
    ran from the pipeline's directory. Found as Python's own path finder finds it; only its
    loader is wrapped, to register the module once it has run."""

    def __init__(self, directories: tuple[Path, ...], stack: contextlib.ExitStack):
        self._directories = directories
        self._stack = stack

    @classmethod
    def install(
        cls, directories: tuple[Path, ...], stack: contextlib.ExitStack
    ) -> contextlib.ExitStack:
        installed = contextlib.ExitStack()
        if _spark_pickler() is None:
            return installed  # only Spark pickles a step's functions
        finder = cls(directories, stack)
        # Just before Python's path finder, which it asks: built-in and frozen modules
        # still come first, as they do without it.
        at = next(
            (i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
            len(sys.meta_path),
        )
        sys.meta_path.insert(at, finder)
        installed.callback(
            lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None
        )
        return installed

    def find_spec(self, name, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not spec.has_location:
            return None
        if found_in_any(self._directories, name, spec.origin) is None:
            return None
        spec.loader = _RegisteringLoader(spec.loader, lambda m: _register_by_value(m, self._stack))
        return spec


class _RegisteringLoader:
    """A module's own loader, which tells `loaded` about the module once it has run."""

    def __init__(self, inner, loaded):
        self._inner = inner
        self._loaded = loaded

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._loaded(module)

    def __getattr__(self, attribute):
        return getattr(self._inner, attribute)
