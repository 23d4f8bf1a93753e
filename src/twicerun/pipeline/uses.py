"""What a step uses from its own pipeline file besides its own source, by name and digest.

A step's code digest is its function as written. A constant the function reads
(`CUTOFF = 10` at the top of the file), a function of the file it calls, a class of
the file it builds, or a value its closure holds (a step made in a loop by a factory)
change what it computes without changing a character of it: `diff` said "diverged
with identical inputs" and `reproduce` DIVERGED, as if the step had stopped repeating
itself, when the pipeline had been edited. Each of them is recorded by name, so a
verdict can say which one changed.

Only what the file itself defines is recorded: modules beside the pipeline have
digests of their own (`OwnModules`), and what is installed is the instrument, not the
pipeline. A value is recorded when it is plain data (numbers, text, bytes, dates,
paths, and lists, tuples, dicts and sets of them, up to `BUDGET` items); anything else
(a connection, an object of an installed class) is left out, since its repr says
nothing stable about it.
"""

from __future__ import annotations

import ast
import datetime
import decimal
import enum
import functools
import hashlib
import inspect
import marshal
import pathlib
import textwrap
from collections.abc import Iterator
from types import CodeType, FunctionType
from typing import Any

# Items of plain data read per value before it counts as too large to record: a lookup
# table built at import is read once per invocation, and a million items would be slow.
BUDGET = 10_000
# The same, for the digest taken before every execution (`values_read`): a value read at
# the budget's edge took 6.5 ms to digest, which every execution of the step would pay.
WATCHED = 2_000

_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_REPR = (datetime.date, datetime.time, datetime.timedelta, decimal.Decimal, pathlib.PurePath)


def _reached(fn: Any) -> tuple[list[CodeType], list[tuple[str, Any]]]:
    """What `fn` (the function a step runs) reaches in its own file: the code of `fn` and
    of the file's functions it calls, followed into theirs, and every global and closure
    value that code names, once per name, the first found. `__file__` and the like say
    where the file is, which moves with a checkout, not what the step computes, and are
    left out."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return [], []
    home = code.co_filename
    codes = [code]
    named: dict[str, Any] = {}

    def visit(f: FunctionType) -> None:
        namespace = getattr(f, "__globals__", {})
        pairs = [(n, namespace[n]) for n in _names(f.__code__) if n in namespace]
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or (), strict=False):
            try:
                pairs.append((name, cell.cell_contents))
            except ValueError:  # a cell not yet filled
                continue
        for name, value in pairs:
            if name in named or name.startswith("__"):
                continue
            named[name] = value
            try:
                inner = value.__code__ if isinstance(value, FunctionType) else None
            except Exception:  # a lazy proxy that raises on a look
                continue
            if inner is not None and inner.co_filename == home and inner not in codes:
                codes.append(inner)
                visit(value)

    visit(fn)
    return codes, list(named.items())


def step_uses(fn: Any) -> dict[str, str]:
    """Name to SHA-256 of what `fn` (the function a step runs) reads from its own file, as
    the file was imported: values that are plain data, and functions and classes the file
    defines (`_reached`)."""
    codes, named = _reached(fn)
    return _digests(fn, named, BUDGET, with_code=True) if codes else {}


def read_now(fn: Any) -> tuple[dict[str, str], list[str], list[tuple[str, Any]]]:
    """Taken before every execution, from one walk of what the step reaches (`_reached`):
    name to SHA-256 of the plain data of its file it reads as it is now, which shows a
    value an earlier step, or an earlier run, changed (a module dict one step fills and
    another reads) and which reached the step past containment, a value of more than
    `WATCHED` items left out as too costly to read every time; its strings
    (`step_strings`); and every value it names, whatever its type, for what is read off
    objects rather than digested (the random generators it draws from,
    runner/generators.py)."""
    codes, named = _reached(fn)
    if not codes:
        return {}, [], []
    # A value the step only writes into (a dict of row counts every step fills) cannot
    # change what it computes; watched, it made every step of such a pipeline look fed
    # past containment, and took the cause from each.
    only_written = _only_written(tuple(codes))
    values = [(n, v) for n, v in named if n not in only_written]
    return _digests(fn, values, WATCHED, with_code=False), _strings(codes, named), named


# Methods that change a list, dict, set or deque in place; called as a statement, their
# result unused, they write into the value without reading what it holds.
_MUTATORS = frozenset(
    {"append", "appendleft", "extend", "extendleft", "add", "update", "insert", "clear", "discard"}
)


# One entry per step (its code and what it calls), read before every execution: sized
# so that a pipeline of thousands of steps parses each step's source once.
@functools.lru_cache(maxsize=8192)
def _only_written(codes: tuple[CodeType, ...]) -> frozenset[str]:
    """The global names that every piece of `codes` mentioning them only writes into:
    `N[k] = v`, `del N[k]`, `N.append(v)` as a statement, `N = v` under `global N`. Any
    other mention (`N[k] += 1`, `len(N)`, `x = N`) reads it, and a code whose source
    cannot be parsed reads every name it mentions."""
    verdict: dict[str, bool] = {}
    for code in codes:
        written = _written_in(code)
        for name in set(_names(code)):
            verdict[name] = verdict.get(name, True) and written is not None and name in written
    return frozenset(n for n, only in verdict.items() if only)


def _written_in(code: CodeType) -> frozenset[str] | None:
    """Names the source of `code` mentions only as written into; None without a source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads: set[str] = set()
    writes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (writes if _writes_only(node, parents) else reads).add(node.id)
        elif isinstance(node, ast.Attribute):
            reads.add(node.attr)  # co_names holds attribute names too
    return frozenset(writes - reads)


def _writes_only(name: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(name)
    if isinstance(name.ctx, (ast.Store, ast.Del)):
        return not isinstance(parent, ast.AugAssign)
    if isinstance(parent, (ast.Subscript, ast.Attribute)) and parent.value is name:
        above = parents.get(parent)
        if isinstance(parent.ctx, (ast.Store, ast.Del)):
            # `N[k] = v`, `N.attr = v`, `del N.attr`: written into, not read.
            return not isinstance(above, ast.AugAssign)
        if isinstance(parent, ast.Subscript):
            return False
    if isinstance(parent, ast.Attribute) and parent.value is name and parent.attr in _MUTATORS:
        call = parents.get(parent)
        return (
            isinstance(call, ast.Call)
            and call.func is parent
            and isinstance(parents.get(call), ast.Expr)
        )
    return False


def _digests(fn: Any, named: list[tuple[str, Any]], budget: int, with_code: bool) -> dict[str, str]:
    home = fn.__code__.co_filename
    base = _directory_of(home)
    found: dict[str, str] = {}
    for name, value in named:
        # A value whose class misbehaves (a lazy proxy that raises on a look) is left out
        # rather than fail the import of a pipeline that runs fine.
        try:
            if isinstance(value, FunctionType):
                inner = value.__code__
                if with_code and inner.co_filename == home and inner is not fn.__code__:
                    found[name] = _digest(_source(value))
            elif isinstance(value, type):
                # A class whose source cannot be read (OSError, TypeError) is left out
                # below, with any other value that raises.
                if getattr(value, "__module__", None) != fn.__module__:
                    continue
                if with_code:
                    found[name] = _digest(inspect.getsource(value).encode("utf-8"))
                else:
                    text = _attributes(value, base, budget)
                    if text is not None:
                        found[name] = _digest(text.encode("utf-8"))
            else:
                text = canonical(value, base, budget)
                if text is None and not with_code and _of_the_file(value, fn):
                    text = _attributes(value, base, budget)
                if text is not None:
                    found[name] = _digest(text.encode("utf-8"))
        except Exception:
            found.pop(name, None)
    return dict(sorted(found.items()))


def _of_the_file(value: Any, fn: Any) -> bool:
    """Whether `value` is an instance of a class the pipeline's file defines."""
    return getattr(type(value), "__module__", None) == fn.__module__


def _attributes(value: Any, base: str, budget: int) -> str | None:
    """The plain data a class of the pipeline's file, or an instance of one, holds in its
    attributes, as `canonical` writes it; None when it holds none. A step that set
    `State.threshold` from a random draw handed the next step another threshold every run
    past containment, and the next step was told `PARALLEL_ORDER`."""
    try:
        held = vars(value)
    except TypeError:
        return None
    plain = {}
    for key, item in held.items():
        if (
            key.startswith("__")
            or callable(item)
            or isinstance(item, (property, classmethod, staticmethod))
        ):
            continue
        text = canonical(item, base, budget)
        if text is not None:
            plain[key] = text
    return repr(sorted(plain.items())) if plain else None


@functools.lru_cache(maxsize=256)
def _directory_of(filename: str) -> str:
    """The resolved directory of a pipeline file, once per file: resolving makes system
    calls, and `values_read` runs before every execution, where each call gave the GIL to
    the threads opening connections and took most of a millisecond to get it back."""
    return str(pathlib.Path(filename).resolve().parent)


def canonical(value: Any, base: str = "", budget_items: int = BUDGET) -> str | None:
    """A text of `value` that is the same in every process while the value is: a set's
    items sorted (its order follows the string hash seed, which differs per process), and
    a path (or text) starting with `base`, the pipeline's directory, written from there,
    since `Path(__file__).parent / "data"` moves with the checkout without changing what
    the step computes; None for anything that is not plain data, or too large to read."""
    budget = [budget_items]

    def text(v: Any, depth: int) -> str | None:
        budget[0] -= 1
        if budget[0] < 0 or depth > 32:
            return None
        if isinstance(v, enum.Enum):
            return f"{type(v).__qualname__}.{v.name}"
        if base and isinstance(v, (str, pathlib.PurePath)):
            shown = str(v)
            if shown == base or shown.startswith(base + "/"):
                return f"{type(v).__name__}(<pipeline directory>{shown[len(base) :]!r})"
        if isinstance(v, _SCALARS + _REPR):
            return repr(v)
        if isinstance(v, (list, tuple, dict, set, frozenset)):
            # Too many items for what is left of the budget: given up before reading one,
            # since this runs before every execution and a lookup table of a million
            # entries took tens of milliseconds to find too large item by item.
            if len(v) * (2 if isinstance(v, dict) else 1) > budget[0]:
                return None
            flat = [y for pair in v.items() for y in pair] if isinstance(v, dict) else list(v)
            parts = all_of(text(x, depth + 1) for x in flat)
            if parts is None:
                return None
            if isinstance(v, dict):
                pairs = (f"{parts[i]}: {parts[i + 1]}" for i in range(0, len(parts), 2))
                return "dict{" + ", ".join(pairs) + "}"
            if isinstance(v, (set, frozenset)):
                return f"{type(v).__name__}{{{', '.join(sorted(parts))}}}"
            return f"{type(v).__name__}[{', '.join(parts)}]"
        return None

    return text(value, 0)


def all_of(texts: Iterator[str | None]) -> list[str] | None:
    """Every text, or None at the first that is None, without reading the rest."""
    found = []
    for t in texts:
        if t is None:
            return None
        found.append(t)
    return found


def _names(code: CodeType) -> Iterator[str]:
    """Every global and attribute name the code, and code nested in it, mentions."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _names(const)


def _source(f: FunctionType) -> bytes:
    try:
        return inspect.getsource(f).encode("utf-8")
    except (OSError, TypeError):
        return marshal.dumps(f.__code__)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def step_text(fn: Any) -> str:
    """The text a step's code holds, lower-cased (`step_strings`, joined). Enough to tell
    whether its SQL names a table, when the SQL is written out rather than built from
    parts."""
    return "\n".join(step_strings(fn)).lower()


def step_strings(fn: Any) -> list[str]:
    """The strings a step's code holds: the string constants of its function, of code
    nested in it and of the functions of its own file it calls, and the text and path
    values of its file that it names."""
    return _strings(*_reached(fn))


def _strings(codes: list[CodeType], named: list[tuple[str, Any]]) -> list[str]:
    parts: list[str] = []

    def constants(c: CodeType) -> None:
        for const in c.co_consts:
            if isinstance(const, str):
                parts.append(const)
            elif isinstance(const, CodeType):
                constants(const)

    for code in codes:
        constants(code)
    for _, value in named:
        try:
            if isinstance(value, (str, pathlib.PurePath)):
                parts.append(str(value))
            elif isinstance(value, (list, tuple)) and len(value) <= BUDGET:
                parts.extend(str(v) for v in value if isinstance(v, (str, pathlib.PurePath)))
        except Exception:  # a lazy proxy that raises on a look
            continue
    return parts
