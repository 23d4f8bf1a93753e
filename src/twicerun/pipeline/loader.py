"""Loading a pipeline file and finding its steps, exactly as the pipeline contract says.

Steps are the module-level list `STEPS` when the file defines one, otherwise
every function defined at the top level of the file (not imported into it)
whose first parameter is named `ctx`, in source order.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import inspect
import marshal
import os
import re
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

from twicerun.display import few
from twicerun.errors import InvalidStep, NoSteps, PipelineError, UsageError
from twicerun.pipeline import spawned
from twicerun.pipeline.declarations import (
    StepDeclaration,
    declaration_of,
    refuse_var_positional,
)
from twicerun.pipeline.own_modules import OwnModules, found_in
from twicerun.pipeline.uses import step_uses

_DEF_LINE = re.compile(r"^\s*(async\s+)?def\s")


@dataclass(frozen=True)
class Step:
    """One step of a pipeline: its place, its function and what it declared."""

    index: int
    name: str
    fn: Callable[..., Any]
    file: str
    line: int
    declaration: StepDeclaration
    seed_value: int | None = None
    # sha256 of the function as written, decorator lines included: editing either is
    # a change in the instrument a verdict must name. "" where Python has no source.
    code_digest: str = ""
    # What the pipeline imported from its own directory, in sys.modules while it runs.
    own: OwnModules | None = field(default=None, compare=False, repr=False)
    # Whether its code names the duckdb module or something from it (`duckdb.sql`), which
    # runs on DuckDB's process-wide default connection, at that connection's thread count.
    uses_duckdb_module: bool = False
    # DuckDB connections of the pipeline's own that its code reaches and the process keeps
    # (`CON = duckdb.connect()` at module level), as (namespace, name): each runs at its
    # own thread count unless set to the run's while the step runs (connections_kept).
    kept_connections: tuple[tuple[dict[str, Any], str], ...] = field(
        default=(), compare=False, repr=False, hash=False
    )
    # Where its code holds `duckdb.connect` under a name bound at import (`from duckdb
    # import connect`), as (namespace, name): a database opened through it while the step
    # runs gets the run's thread count too.
    connect_names: tuple[tuple[dict[str, Any], str], ...] = field(
        default=(), compare=False, repr=False, hash=False
    )
    # What it uses from its own file besides its source (constants, the file's functions,
    # its closure's values), by name and digest: part of its code (pipeline/uses.py).
    uses: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def connections_kept_named(self) -> list[tuple[Any, list[str]]]:
        """The connections of `kept_connections` as their names hold them now, each once,
        with the names that hold it, sorted."""
        found: dict[int, tuple[Any, set[str]]] = {}
        for namespace, name in self.kept_connections:
            value = namespace.get(name)
            if is_duckdb_connection(value):
                found.setdefault(id(value), (value, set()))[1].add(name)
        return [(con, sorted(names)) for con, names in found.values()]

    def connections_kept(self) -> list[Any]:
        """The connections of `kept_connections` as their names hold them now, each once."""
        return [con for con, _ in self.connections_kept_named()]

    def call(self, ctx: Any) -> Any:
        """Call the step as the contract says: fn(ctx), plus its declared seed. What it
        returns is handed back only for the report to say it went nowhere."""
        with self.own.active() if self.own is not None else contextlib.nullcontext():
            if self.declaration.seed is not None:
                return self.fn(ctx, **{self.declaration.seed: self.seed_value})
            return self.fn(ctx)


@dataclass(frozen=True)
class Pipeline:
    """A loaded pipeline file: its steps in run order and the digest of its source."""

    path: Path
    digest: str
    discovered_by: str
    steps: tuple[Step, ...]
    engine: str = "duckdb"
    # Functions taking `ctx` that the file imported rather than defined: not steps when
    # steps are found by definition, and the likeliest reason a read finds nothing.
    imported: tuple[str, ...] = ()

    @property
    def seeds(self) -> dict[str, int]:
        return {s.name: s.seed_value for s in self.steps if s.seed_value is not None}


ENGINES = ("duckdb", "spark")


def _engine(module: ModuleType, path: Path, override: str | None) -> str:
    """The engine the pipeline runs on: --engine, else its ENGINE, else DuckDB. An engine
    twicerun does not drive is refused, never run on DuckDB by accident: its SQL would
    fail, or worse, mean something else."""
    declared = vars(module).get("ENGINE", "duckdb")
    if not isinstance(declared, str) or declared.lower() not in ENGINES:
        raise PipelineError(
            f"{path} declares ENGINE = {declared!r}; twicerun runs pipelines on "
            f"{' or '.join(repr(e) for e in ENGINES)} (no ENGINE means 'duckdb'), so it refuses "
            f"rather than run another engine's steps on one of those"
        )
    return (override or declared).lower()


def load_pipeline(
    path: str | Path,
    seed_overrides: Mapping[str, int] | None = None,
    engine: str | None = None,
    *,
    recorded_seeds: bool = False,
) -> Pipeline:
    """Import the file once and return its steps; refuse anything the contract refuses.

    `recorded_seeds` says the overrides are a recorded run's, not the user's `--seed`: a
    step the file no longer has, or that no longer declares a seed, keeps its own, since
    refusing would name a flag nobody gave."""
    source_path = check_pipeline_path(path)
    data = source_path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    own = OwnModules(source_path.parent)
    module = _import(source_path, digest, own)
    chosen = _engine(module, source_path, engine)

    if "STEPS" in vars(module):
        functions = _listed_steps(module, source_path)
        how = "STEPS"
    else:
        functions = _discovered_steps(module, source_path)
        how = "functions"
    imported = _imported_ctx_functions(module, source_path) if how == "functions" else ()
    if not functions and how == "STEPS":
        raise NoSteps(
            f"STEPS in {path} is empty, so it defines no steps: list the step functions in "
            f"it, or remove it, and every top-level function whose first parameter is `ctx` "
            f"is a step"
        )
    if not functions:
        raise NoSteps(
            f"{path} defines no steps: define top-level functions whose first parameter is "
            f"`ctx`, or a list STEPS of step functions" + _named_otherwise(module, source_path)
        )

    overrides = dict(seed_overrides or {})
    steps = []
    for index, (fn, name) in enumerate(zip(functions, step_names(functions), strict=True)):
        step = _make_step(index, name, fn, overrides, own.directory, listed=how == "STEPS")
        steps.append(replace(step, own=own))
    if overrides and not recorded_seeds:
        unknown = ", ".join(sorted(overrides))
        raise UsageError(
            f"--seed names {unknown}, which is no step of {path} that declares a seed; "
            f"seeded steps here: {', '.join(s.name for s in steps if s.seed_value is not None) or 'none'}"
        )
    return Pipeline(
        path=source_path,
        digest=digest,
        discovered_by=how,
        steps=tuple(steps),
        engine=chosen,
        imported=imported,
    )


def check_pipeline_path(path: str | Path) -> Path:
    """The file, or the sentence that says why it cannot be a pipeline, found without
    running any of it: a command given several pipelines refuses a typo in the last one
    before the first one runs."""
    source_path = Path(path)
    if not source_path.exists():
        raise PipelineError(f"pipeline file {path} does not exist{_nearby(source_path)}")
    if source_path.is_dir():
        raise PipelineError(
            f"{path} is a directory; pass the pipeline's Python file"
            f"{_nearby(source_path / 'pipeline.py')}"
        )
    try:
        compile(source_path.read_bytes(), str(source_path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise PipelineError(_syntax(source_path, exc)) from exc
    return source_path


def missing_module_advice(exc: BaseException, pipeline: Path | None = None) -> str:
    """Where to install a module a pipeline imports that is not there: the Python twicerun
    runs in, which is not always the one the pipeline was written against. Or, where the
    module is the team's own, in a directory Python does not search, how to let it."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name:
        return ""
    package = name.partition(".")[0]
    holder = _local_holder(package, pipeline)
    if name != package and (holder is not None or package in sys.modules):
        # The package was found and a module inside it was not: installing the package,
        # or pointing Python at it, would change nothing.
        return ""
    if holder is not None:
        # "pip install" of a name a team gave its own code installs a stranger's package.
        shown = _shown_path(holder)
        where = "the working directory" if shown == "." else shown
        return (
            f"{package} is in {where}, which Python does not search when it imports the "
            f"pipeline; put it on the path (PYTHONPATH={shown}) or install the project that "
            f"holds it (pip install -e)"
        )
    if _in_the_actions_venv():
        # Nobody can pip install into the action's venv between its steps: it has an input.
        return (
            f"the action runs the pipelines in an environment of its own; list {package} in a "
            f"requirements file and name that file in the action's `requirements` input"
        )
    return (
        f"twicerun runs the pipeline in {sys.executable}; install what the pipeline imports "
        f"there: {sys.executable}{_safe_path_flag()} -m pip install {package}"
    )


def _local_holder(package: str, pipeline: Path | None) -> Path | None:
    """The directory holding `package` (a package directory or a module file), among the
    working directory and those above the pipeline, or their `src/` (the layout packaging
    guides teach); None where there is none."""
    places = [Path.cwd()]
    if pipeline is not None:
        places += list(Path(pipeline).resolve().parent.parents)
    for place in [p for base in places for p in (base, base / "src")]:
        try:
            if (place / package / "__init__.py").is_file() or (place / f"{package}.py").is_file():
                return place
        except OSError:
            continue
    return None


def _shown_path(path: Path) -> str:
    """`path` relative to the working directory where it is the working directory or below
    it (`.`, `src`), absolute otherwise."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _safe_path_flag() -> str:
    """` -P` where the working directory holds a file named as a standard module
    (`types.py`, `email.py`): `python -m pip` puts that directory first on sys.path, so
    pip would import the file instead and fail before installing anything."""
    try:
        shadows = any(p.stem in sys.stdlib_module_names for p in Path.cwd().glob("*.py"))
    except OSError:
        return ""
    return " -P" if shadows else ""


def _in_the_actions_venv() -> bool:
    """Whether this is the venv action.yml builds in RUNNER_TEMP (where it caches it)."""
    temp = os.environ.get("RUNNER_TEMP")
    if not temp:
        return False
    try:
        return Path(sys.prefix).resolve() == (Path(temp) / "twicerun-venv").resolve()
    except OSError:
        return False


def _syntax(path: Path, exc: SyntaxError) -> str:
    # A module the pipeline imports may be the one that does not parse: its line is not
    # a line of the pipeline's file.
    elsewhere = exc.filename and Path(exc.filename).resolve() != path.resolve()
    where = f" in {_shown(Path(exc.filename))}" if elsewhere else ""
    said = f"could not import {path}: SyntaxError{where} at line {exc.lineno}: {exc.msg}"
    if path.suffix != ".py":
        # `twicerun run README.md`: a slip of the shell's completion, not a broken pipeline.
        nearby = _nearby(path)
        said += f"; a pipeline is a Python file, and this one does not end in .py{nearby}"
    return said


def _shown(path: Path) -> Path:
    """`path` relative to the working directory where it is under it, as a user typed it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _nearby(path: Path) -> str:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return ""
    candidates = sorted(p.name for p in parent.glob("*.py"))
    return f" (Python files in {parent}: {', '.join(candidates)})" if candidates else ""


def _import(path: Path, digest: str, own: OwnModules) -> ModuleType:
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"_twicerun_pipeline_{stem}_{digest[:12]}"
    if own.package:
        # A module of its package, so that `from .common import q` finds `etl.common`.
        module_name = f"{own.package}.{module_name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"could not import {path}: Python does not recognise it as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # The arguments the file sees are those of `python PIPELINE` with none given, not
    # twicerun's: a pipeline that parses sys.argv as it is imported (argparse at module
    # level) refused `run p.py --runs 5` in a usage line that read like twicerun's own.
    argv = sys.argv
    sys.argv = [str(path)]
    try:
        with own.active():
            spec.loader.exec_module(module)
    except SystemExit as exc:
        # Its exit status would have become twicerun's: sys.exit(0) in a pipeline's top
        # level ended twicerun with 0 and no word, which a required check reads as green.
        del sys.modules[module_name]
        where = _line_in(exc, path)
        called = "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"
        raise PipelineError(
            f"could not import {path}{where}: it called {called} while being "
            f"imported; twicerun imports a pipeline rather than running it as a script, so "
            f'put what should run only as a script under `if __name__ == "__main__":`'
        ) from None
    except InvalidStep as exc:
        del sys.modules[module_name]
        where = _line_in(exc, path)
        raise InvalidStep(f"{path}{where}: {exc}") from exc
    except SyntaxError as exc:
        del sys.modules[module_name]
        raise PipelineError(_syntax(path, exc)) from exc
    except Exception as exc:
        del sys.modules[module_name]
        where = _line_in(exc, path)
        advice = missing_module_advice(exc, path)
        raise PipelineError(
            f"could not import {path}{where}: {type(exc).__name__}: {exc}"
            + (f" ({advice})" if advice else "")
        ) from exc
    finally:
        sys.argv = argv
    own.pipeline = module
    own.spawned = spawned.provide(module_name, path)
    return module


def line_in(exc: BaseException, path: str | Path) -> int | None:
    """The deepest line of `path` in the exception's traceback: where the pipeline's own
    code was when it raised. None when the file is not in the traceback."""
    resolved = Path(path).resolve()
    lines = [
        frame.lineno
        for frame in traceback.extract_tb(exc.__traceback__)
        if Path(frame.filename).resolve() == resolved
    ]
    return lines[-1] if lines else None


def _line_in(exc: BaseException, path: Path) -> str:
    line = line_in(exc, path)
    return f":{line}" if line is not None else ""


def _listed_steps(module: ModuleType, path: Path) -> list[Callable[..., Any]]:
    listed = module.STEPS
    if not isinstance(listed, (list, tuple)):
        raise PipelineError(
            f"STEPS in {path} is a {type(listed).__name__}; make it a list of step functions"
        )
    for position, item in enumerate(listed):
        if not callable(item):
            raise PipelineError(
                f"STEPS in {path} holds {item!r} ({type(item).__name__}) at position "
                f"{position}; every entry must be a step function"
            )
    seen: dict[str, int] = {}
    for position, name in enumerate(step_names(listed)):
        if name in seen:
            raise PipelineError(
                f"STEPS in {path} lists {name} at positions {seen[name]} and {position}; "
                f"a step name must be unique, since reports and artifacts are filed under it"
            )
        seen[name] = position
    return list(listed)


def _bound_name(fn: Any) -> str:
    """What a step without a name of its own is called after: the function a
    `functools.partial` binds, or a callable object's class."""
    fn = _unbound(fn)
    return getattr(fn, "__name__", None) or type(fn).__name__


def step_names(functions: Sequence[Callable[..., Any]]) -> list[str]:
    """Each step's name: a function's own name; a partial or a callable object, which has
    none, the name of what it binds (`load` for `partial(load, table="orders")`), with
    its position added (`load_2`) when another step is called that too, as several
    partials of one function are."""
    own = [getattr(fn, "__name__", None) for fn in functions]
    derived = [name or _bound_name(fn) for name, fn in zip(own, functions, strict=True)]
    counts = Counter(derived)
    return [
        name if mine is not None or counts[name] == 1 else f"{name}_{index}"
        for index, (mine, name) in enumerate(zip(own, derived, strict=True))
    ]


def _discovered_steps(module: ModuleType, path: Path) -> list[Callable[..., Any]]:
    resolved = str(path.resolve())
    found = []
    for value in vars(module).values():
        if not inspect.isfunction(value):
            continue
        code = value.__code__
        if (
            str(Path(code.co_filename).resolve()) != resolved
            or value.__qualname__ != value.__name__
        ):
            continue
        params = list(inspect.signature(value).parameters)
        if params and params[0] == "ctx":
            found.append(value)
    found.sort(key=lambda f: f.__code__.co_firstlineno)
    return found


def _named_otherwise(module: ModuleType, path: Path) -> str:
    """For a file with no steps: its own top-level functions whose first parameter has
    another name (`def load(context)`), which is the likeliest reason it has none."""
    resolved = str(path.resolve())
    named = []
    for name, value in vars(module).items():
        if not inspect.isfunction(value) or name.startswith("_") or value.__qualname__ != name:
            continue
        if str(Path(value.__code__.co_filename).resolve()) != resolved:
            continue
        params = list(inspect.signature(value).parameters)
        if params:
            named.append(f"{name}({params[0]})")
    if not named:
        return ""
    return (
        f" ({few(named, 3)} {'takes' if len(named) == 1 else 'take'} a first parameter of "
        f"another name; steps are found by the name ctx)"
    )


def _imported_ctx_functions(module: ModuleType, path: Path) -> tuple[str, ...]:
    resolved = str(path.resolve())
    found = []
    for name, value in vars(module).items():
        if not inspect.isfunction(value) or name.startswith("_"):
            continue
        if str(Path(value.__code__.co_filename).resolve()) == resolved:
            continue
        params = list(inspect.signature(value).parameters)
        if params and params[0] == "ctx":
            found.append(name)
    return tuple(found)


def _unbound(fn: Any) -> Any:
    """What a `functools.partial` (or a partial of one) binds; anything else as it is."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _underlying(fn: Callable[..., Any]) -> Any:
    """The function whose body a step runs: through `functools.partial` to the function it
    binds, and from a callable object to its class's `__call__`."""
    fn = _unbound(fn)
    if not inspect.isroutine(fn) and callable(fn):
        return type(fn).__call__
    return fn


def _def_line(fn: Callable[..., Any]) -> tuple[str, int]:
    """The file and the line of the `def` itself, below any decorators."""
    fn = _underlying(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ("", 0)
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return (code.co_filename, code.co_firstlineno)
    for offset, text in enumerate(lines):
        if _DEF_LINE.match(text):
            return (code.co_filename, start + offset)
    return (code.co_filename, start)


# A repr that names a memory address changes from one process to the next.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _stable_repr(value: Any) -> str:
    return _ADDRESS.sub(" at 0x?", repr(value))


def _code_text(fn: Any) -> bytes:
    """What a step runs, as bytes that change when its code does, or b"" when unreadable.

    A plain function is its source as written, decorators included. A `functools.partial`
    is its function's text plus the values it binds, and a callable object is its
    class's source plus its attributes, since either changes what the call does.
    Without source (a function made by exec), the compiled code stands in.
    """
    if isinstance(fn, functools.partial):
        inner = _code_text(fn.func)
        bound = _stable_repr((fn.args, sorted(fn.keywords.items())))
        return inner and inner + b"\n# bound: " + bound.encode("utf-8")
    target = fn
    state = b""
    if not inspect.isroutine(fn) and callable(fn):
        target = type(fn)
        attributes = sorted(getattr(fn, "__dict__", {}).items())
        state = b"\n# attributes: " + _stable_repr(attributes).encode("utf-8")
    try:
        return inspect.getsource(target).encode("utf-8") + state
    except (OSError, TypeError):
        code = getattr(_underlying(fn), "__code__", None)
        return marshal.dumps(code) + state if code is not None else b""


def code_digest(fn: Callable[..., Any]) -> str:
    """The digest of what a step runs (see `_code_text`), or "" when it cannot be read."""
    text = _code_text(fn)
    return hashlib.sha256(text).hexdigest() if text else ""


def _refuse_deferred_body(name: str, fn: Callable[..., Any]) -> None:
    """A step whose call runs none of its body: `async def` returns a coroutine and a
    function with `yield` a generator, so the step would write nothing, with no error."""
    body = inspect.unwrap(fn)
    if inspect.iscoroutinefunction(body) or inspect.isasyncgenfunction(body):
        what, made = "an async function (async def)", "a coroutine"
    elif inspect.isgeneratorfunction(body):
        what, made = "a generator function (it has a yield)", "a generator"
    else:
        return
    raise PipelineError(
        f"step {name} is {what}: twicerun calls it as {name}(ctx), which only makes {made} and "
        f"runs none of its body, so it would write nothing; make it a plain def"
    )


def _duckdb_reached(
    fn: Callable[..., Any], directory: Path | None = None
) -> tuple[bool, tuple[tuple[dict[str, Any], str], ...], tuple[tuple[dict[str, Any], str], ...]]:
    """What of DuckDB the step's code (nested functions included) reaches outside its ctx,
    itself or through a helper it calls: a function of the pipeline file, or a function or
    module of the pipeline's `directory`.

    First, whether it names the duckdb module, under any alias, or something taken from it
    (`from duckdb import sql`), which runs on DuckDB's process-wide default connection.
    Second, the connections of its own that the process keeps (`CON = duckdb.connect()` at
    the top of the file or of a helper module), each as the namespace and the name that
    hold it, so that a connection made again later is the one found. Third, where it
    holds `duckdb.connect` under a name of its own (`from duckdb import connect`), bound
    before any step ran. Read from the
    compiled code, not the source, so it costs nothing per execution; a helper reached
    some other way (a method, a callback) is not seen."""
    seen: set[int] = set()
    named = False
    kept: dict[tuple[int, str], tuple[dict[str, Any], str]] = {}
    connects: dict[tuple[int, str], tuple[dict[str, Any], str]] = {}

    def names(c: CodeType):
        yield from c.co_names
        for const in c.co_consts:
            if isinstance(const, CodeType):
                yield from names(const)

    def own(value: Any) -> bool:
        if directory is None:
            return False
        if isinstance(value, ModuleType):
            name, file = value.__name__, getattr(value, "__file__", None)
        else:
            code = getattr(value, "__code__", None)
            name, file = getattr(value, "__module__", ""), code and code.co_filename
        return isinstance(name, str) and found_in(directory, name, file) is not None

    def held(namespace: dict[str, Any], name: str) -> bool:
        """Whether `namespace[name]` is a connection (kept) or else from duckdb (named)."""
        nonlocal named
        value = namespace.get(name)
        if is_duckdb_connection(value):
            kept[(id(namespace), name)] = (namespace, name)
            return True
        if name == "duckdb" or _from_duckdb(value):
            named = True
            if getattr(value, "__name__", "") == "connect" and callable(value):
                connects[(id(namespace), name)] = (namespace, name)
            return True
        return False

    def walk(f: Any) -> None:
        code = getattr(f, "__code__", None)
        found = getattr(f, "__globals__", {})
        if code is None or id(code) in seen:
            return
        seen.add(id(code))
        for name in names(code):
            if held(found, name):
                continue
            value = found.get(name)
            if isinstance(value, FunctionType) and (value.__globals__ is found or own(value)):
                walk(value)
            elif isinstance(value, ModuleType) and own(value):
                defined = vars(value)
                for key, v in list(defined.items()):
                    if (
                        not held(defined, key)
                        and isinstance(v, FunctionType)
                        and v.__globals__ is defined
                    ):
                        walk(v)

    walk(_underlying(fn))
    return named, tuple(kept.values()), tuple(connects.values())


def is_duckdb_connection(value: Any) -> bool:
    """A DuckDB connection, told by its type's name and module: this room does not import
    duckdb."""
    kind = type(value)
    return kind.__name__ == "DuckDBPyConnection" and _from_duckdb(kind)


def _from_duckdb(value: Any) -> bool:
    """The duckdb module, or something taken from it."""
    where = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", "")
    return isinstance(where, str) and where.split(".")[0] in ("duckdb", "_duckdb")


def _make_step(
    index: int,
    name: str,
    fn: Callable[..., Any],
    overrides: dict[str, int],
    directory: Path | None = None,
    listed: bool = True,
) -> Step:
    """`listed`: the function is in STEPS, rather than found by its first parameter."""
    declaration = declaration_of(fn)
    refuse_var_positional(fn)
    _refuse_deferred_body(name, fn)
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    if not parameters:
        raise PipelineError(
            f"step {name} takes no parameters; twicerun calls every step as {name}(ctx)"
        )
    first = parameters[0]
    if first.kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise PipelineError(
            f"step {name} takes {first.name} as a keyword-only parameter; twicerun passes ctx "
            f"by position, as {name}(ctx), so write def {name}(ctx, ...)"
        )
    if (
        declaration.seed is not None
        and declaration.seed in {p.name for p in parameters}
        and next(p for p in parameters if p.name == declaration.seed).kind
        is inspect.Parameter.POSITIONAL_ONLY
    ):
        raise PipelineError(
            f"step {name} takes its seed {declaration.seed} as a positional-only parameter; "
            f"twicerun passes the seed by name, so move it after the /"
        )
    for p in parameters[1:]:
        if (
            p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_KEYWORD,)
            and p.name != declaration.seed
        ):
            # Found by its first parameter, it is as likely a helper the steps call.
            helper = (
                ""
                if listed
                else f"; or, if {name} is a helper the steps call, list the steps in "
                f"STEPS = [...], since without it every top-level function whose first "
                f"parameter is ctx is a step"
            )
            raise PipelineError(
                f"step {name} has a parameter {p.name} with no default; twicerun calls a step "
                f"as {name}(ctx) plus a declared seed, so give {p.name} a default{helper}"
            )
    seed_value = None
    if declaration.seed is not None:
        default = inspect.signature(fn).parameters[declaration.seed].default
        seed_value = overrides.pop(name, default)
    file, line = _def_line(fn)
    names_duckdb, kept_connections, connect_names = _duckdb_reached(fn, directory)
    return Step(
        code_digest=code_digest(fn),
        index=index,
        name=name,
        fn=fn,
        file=file,
        line=line,
        declaration=declaration,
        seed_value=seed_value,
        uses_duckdb_module=names_duckdb,
        kept_connections=kept_connections,
        connect_names=connect_names,
        uses=step_uses(_underlying(fn)),
    )
