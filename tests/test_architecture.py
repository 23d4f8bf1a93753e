"""The house plan, enforced: which room may import which (docs/architecture.md)."""

from __future__ import annotations

import ast

from conftest import REPO

PACKAGE = REPO / "src" / "twicerun"

# errors.py and _version.py are shared leaves: types and a string, importable by every room.
ALLOWED = {
    "pipeline": {"errors"},
    "storage": {"errors", "pipeline"},
    "compare": {"errors"},
    "judge": {"errors", "compare"},
    "result": set(),
    "vocabulary": set(),
    "render": {"result"},
    "github": {"errors", "result", "render"},
    "verdicts": {"errors", "storage", "compare"},
    "runner": {"errors", "pipeline", "storage", "compare", "judge", "result"},
}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "twicerun" or len(parts) < 2:
        return None
    return parts[1]


# Shared leaves every room may import: types, words and a version string.
LEAVES = {"errors", "vocabulary", "_version"}


def imports_of(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_each_room_imports_only_what_the_house_plan_allows():
    breaches = []
    for room, allowed in ALLOWED.items():
        directory = PACKAGE / room
        if not directory.exists():
            continue
        for path in sorted(directory.rglob("*.py")):
            for module in imports_of(path):
                if module == "twicerun":
                    other = "package"
                else:
                    other = room_of(module)
                if other is None or other == room or other in LEAVES:
                    continue
                if other not in allowed:
                    breaches.append(f"{path.relative_to(PACKAGE)} imports {module}")
    assert breaches == []


def test_nothing_below_the_cli_prints_or_exits():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or "cli" in path.relative_to(PACKAGE).parts[:1]:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ("print", "echo", "exit", "_exit", "secho"):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} calls {name}")
        if "click" in imports_of(path):
            offenders.append(f"{path.relative_to(PACKAGE)} imports click")
    assert offenders == []


def test_the_public_surface_is_what_all_says():
    import twicerun

    assert sorted(twicerun.__all__) == ["InvalidStep", "__version__", "step"]
    for name in twicerun.__all__:
        assert hasattr(twicerun, name)
