"""The artifact names a pipeline's steps write, read from their source without running them.

Only `ctx.write("name", ...)` with a literal name can be read this way; a name built at run
time cannot, and the result says so, so that a caller never mistakes "not found in the
source" for "not written".
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field

from twicerun.pipeline.loader import Pipeline


@dataclass(frozen=True)
class LiteralWrites:
    """Artifact name to the indexes of the steps whose source writes it literally."""

    by_name: dict[str, list[int]] = field(default_factory=dict)
    # False when some write's name is not a literal, or some step's source cannot be read.
    complete: bool = True


def literal_writes(pipeline: Pipeline) -> LiteralWrites:
    by_name: dict[str, list[int]] = {}
    complete = True
    for step in pipeline.steps:
        try:
            source = textwrap.dedent(inspect.getsource(step.fn))
            tree = ast.parse(source)
            params = list(inspect.signature(step.fn).parameters)
        except (OSError, TypeError, SyntaxError, ValueError):
            complete = False
            continue
        ctx_name = params[0] if params else "ctx"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "write"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == ctx_name
            ):
                if (
                    node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    by_name.setdefault(node.args[0].value, []).append(step.index)
                else:
                    complete = False
    return LiteralWrites(by_name, complete)
