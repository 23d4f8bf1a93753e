"""The house plan, enforced: which room may import which (docs/architecture.md)."""

from __future__ import annotations

import ast
import re

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


# Shared leaves every room may import: types, words, terminal widths, typed JSON reading
# and a version string.
LEAVES = {"errors", "vocabulary", "sql", "findings", "display", "typed", "_version"}


def imports_of(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "twicerun":
            found.update(f"twicerun.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


# Rooms of the house plan not built yet. A room listed here must not exist, and every
# other room in ALLOWED must: building one means taking it off this list, which is
# what makes its import rule apply.
PLANNED: set[str] = set()


def breaches_in(package) -> list[str]:
    breaches = []
    for room, allowed in ALLOWED.items():
        for path in sorted((package / room).rglob("*.py")):
            for module in imports_of(path):
                other = "package" if module == "twicerun" else room_of(module)
                if other is None or other == room or other in LEAVES:
                    continue
                if other not in allowed:
                    breaches.append(f"{path.relative_to(package)} imports {module}")
    return breaches


def test_each_room_imports_only_what_the_house_plan_allows():
    assert breaches_in(PACKAGE) == []


def test_every_room_on_the_plan_exists_unless_planned_and_nothing_else_does():
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms - {"cli"} == set(ALLOWED) - PLANNED


def test_the_import_rule_catches_a_room_importing_upward(tmp_path):
    (tmp_path / "render").mkdir()
    (tmp_path / "render" / "x.py").write_text("from twicerun.runner.loop import run_pipeline\n")
    assert breaches_in(tmp_path) == ["render/x.py imports twicerun.runner.loop"]


OUTPUT_CALLS = {"print", "echo", "secho", "exit", "_exit", "abort"}
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}


def prints_or_exits(source: str) -> list[str]:
    """Where a module writes to the terminal or ends the process, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            if name in OUTPUT_CALLS:
                found.append(f"{node.lineno} calls {name}")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in ("write", "writelines", "flush")
                and getattr(func.value, "attr", None) in STREAMS
            ):
                found.append(f"{node.lineno} writes to {func.value.attr}")
        elif isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if getattr(target, "id", None) == "SystemExit":
                found.append(f"{node.lineno} raises {target.id}")
    return found


def test_nothing_below_the_cli_prints_or_exits():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or "cli" in path.relative_to(PACKAGE).parts[:1]:
            continue
        for where in prints_or_exits(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(PACKAGE)}:{where}")
        if "click" in imports_of(path):
            offenders.append(f"{path.relative_to(PACKAGE)} imports click")
    assert offenders == []


def test_the_printing_rule_sees_each_way_out():
    source = (
        "import sys, os\n"
        "def f():\n"
        "    sys.stdout.write('x')\n"
        "    sys.stderr.write('x')\n"
        "    print('x')\n"
        "    os._exit(1)\n"
        "    raise SystemExit(2)\n"
        "    raise SystemExit\n"
        "    log.write('fine: a file, not a stream')\n"
    )
    assert sorted(int(w.split()[0]) for w in prints_or_exits(source)) == [3, 4, 5, 6, 7, 8]


def test_the_public_surface_is_what_all_says():
    import twicerun

    assert sorted(twicerun.__all__) == ["InvalidStep", "__version__", "step"]
    for name in twicerun.__all__:
        assert hasattr(twicerun, name)


def test_the_package_names_no_step_of_the_shipped_pipelines():
    # What twicerun says about its own fixtures is described by scripts/, never by src/.
    steps = set()
    for path in sorted((REPO / "pipelines").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        steps |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert steps, "pipelines/ holds no step functions to look for"
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        words = set(re.findall(r"\w+", path.read_text(encoding="utf-8")))
        named += [f"{path.relative_to(PACKAGE)} names {s}" for s in sorted(steps & words)]
    assert named == []
