"""JSON read back into dataclasses, every value checked against the type its field declares.

For what twicerun reads back from disk, a document another process (or another
machine, or a person's editor) may have written: a Result, the gate document the fork
flow posts from, a step's receipt. A value of the wrong type is a TypeError or
ValueError naming the class and field where it sits, raised here, rather than a crash
wherever a renderer or a verdict first touches the value.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import types
import typing
from typing import Any


def typed(cls: type, data: Any) -> Any:
    """A dataclass from a JSON object, every value checked against the type its field
    declares (TypeError or ValueError naming the field otherwise). Keys the class does
    not have are dropped: fields a newer minor version added."""
    return _build(cls, data)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # Resolving the annotations is most of the cost of a small record, and receipts are
    # read by the hundred.
    return typing.get_type_hints(cls)


def _build(cls: type, data: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} should be an object, not {_shown(data)}")
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            continue  # a field added by a newer minor version: ignore it
        try:
            kwargs[key] = _value(hints[key], value)
        except (TypeError, ValueError) as exc:
            # Named by where it is, so a hand-edited or foreign document says which value.
            raise type(exc)(f"{cls.__name__}.{key}: {exc}") from exc
    return cls(**kwargs)


# Each scalar a field declares, and what JSON must hold for it: a document read back
# (a saved invocation, a committed artifact, a fork's gate document) is checked here,
# not left to fail wherever a renderer first touches the value.
_SCALARS: dict[Any, tuple[type, ...]] = {
    bool: (bool,),
    int: (int,),
    float: (int, float),
    str: (str,),
}


def _shown(value: Any) -> str:
    text = (
        json.dumps(value) if isinstance(value, str | int | float | bool) else type(value).__name__
    )
    return text if len(text) <= 40 else text[:37] + "..."


def _value(hint: Any, value: Any) -> Any:
    if value is None:
        if hint is Any or type(None) in typing.get_args(hint):
            return None
        raise TypeError("null where a value is needed")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in _SCALARS:
        if not isinstance(value, _SCALARS[hint]) or (hint is not bool and isinstance(value, bool)):
            raise TypeError(f"{_shown(value)} is not {hint.__name__}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise TypeError(f"{_shown(value)} is not a list")
        return [_value(args[0], v) for v in value] if args else value
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{_shown(value)} is not an object")
        return {str(k): _value(args[1], v) for k, v in value.items()} if args else value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin in (typing.Union, types.UnionType):
        # The first option the value fits: `Amplifier | Reexecution` holds either's words.
        options = [o for o in args if o is not type(None)]
        for option in options[:-1]:
            try:
                return _value(option, value)
            except (ValueError, TypeError):
                continue
        return _value(options[-1], value)
    return value


def schema_said(document: Any) -> str:
    """What a JSON document says it is, for a sentence that refuses it: `schema 'x/1'`,
    `no schema field`, or `a JSON list, not an object`; never Python's `None`."""
    if not isinstance(document, dict):
        kind = {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
            type(document), "number"
        )
        return f"a JSON {kind}, not an object"
    schema = document.get("schema")
    return "no schema field" if schema is None else f"schema {schema!r}"
