"""Whether a file's source shows steps, read without importing it.

A glob of pipelines (pipelines/*.py) also finds the modules they import. Importing each
file to find out which is which ran a pipeline's top-level code once more than the
invocation that then ran it, where the contract says once. The source answers for
almost every file: a `STEPS` assignment, or a top-level function whose first parameter
is `ctx`, is what the loader looks for.
"""

from __future__ import annotations

import ast
from pathlib import Path

# Statements whose bodies still run at module level: a step defined under `if` or `try`
# is defined at the top level all the same.
_BLOCKS = (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.Match, ast.TryStar)


def shows_steps(path: str | Path) -> bool | None:
    """True when the source defines `STEPS` or a top-level function taking `ctx` first;
    False when it defines neither; None when the source cannot be read or parsed (the
    loader, importing it, then says what is wrong)."""
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    return any(_is_step_like(node) for node in _module_level(tree.body))


def _module_level(statements: list[ast.stmt]):
    for node in statements:
        yield node
        if isinstance(node, _BLOCKS):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_level(handler.body)
            for case in getattr(node, "cases", []):
                yield from _module_level(case.body)


def _is_step_like(node: ast.stmt) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        params = [*node.args.posonlyargs, *node.args.args]
        return bool(params) and params[0].arg == "ctx"
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return any(
        isinstance(name, ast.Name) and name.id == "STEPS"
        for target in targets
        for name in ast.walk(target)
    )
