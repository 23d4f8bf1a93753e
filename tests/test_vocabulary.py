"""The words the tool prints live in `twicerun.vocabulary`, and nowhere else as literals."""

from __future__ import annotations

import ast
import json
import re

from conftest import REPO

from twicerun.result import load_result
from twicerun.vocabulary.audit import Repeatability
from twicerun.vocabulary.loop import Amplifier, Cause, Difference, Hint, Status

SRC = REPO / "src" / "twicerun"
CODES = [m.value for kind in (Status, Difference, Cause, Hint) for m in kind]
# The ladder's and the audit's distinctive words (their lower-case ones, such as
# "same" or "diverged", are ordinary English and checked by their enums' use instead).
CODES += ["FIRST DIFFERENCE", "COULD NOT CHECK", "REPRODUCED", "DIVERGED"]
CODES += [m.word for m in Repeatability]
NAMES = {m.value for m in Amplifier}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def spelled_out(source: str) -> list[tuple[int, str]]:
    """(line, literal) for every string literal, docstrings aside, that spells a word."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):  # names in __all__ are identifiers, not words printed
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip |= {id(c) for c in ast.walk(node.value)}
    pattern = re.compile(r"\b(" + "|".join(CODES) + r")\b")
    hits = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and (pattern.search(node.value) or node.value in NAMES)
        ):
            hits.append((node.lineno, node.value))
    return hits


def test_no_status_class_cause_or_amplifier_is_spelled_outside_the_vocabulary():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if "vocabulary" in path.relative_to(SRC).parts:
            continue
        for line, text in spelled_out(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(REPO)}:{line}: {text[:60]!r}")
    assert offenders == []


def test_the_check_sees_a_spelled_word_in_code_and_in_an_f_string_but_not_a_docstring():
    source = (
        'def f(s):\n    """A DIVERGENT step."""\n'
        '    if s == "PARALLEL_ORDER":\n        return f"{s}: VALUE_DRIFT"\n'
        '    return "tie collapse"\n'
    )
    assert sorted(line for line, _ in spelled_out(source)) == [3, 4, 5]


def test_a_loaded_result_holds_members_of_the_vocabulary(tmp_path):
    newest = sorted((REPO / "results").glob("reference-*.json"))[-1]
    result = load_result(newest)
    steps = [s for s in result.steps if s.status is not None]
    assert steps and all(isinstance(s.status, Status) for s in steps)
    assert all(isinstance(c, Difference) for s in steps for c in s.classes)
    assert all(isinstance(s.cause, Cause) for s in steps if s.cause)
    # ...and writes them back as the same words.
    written = json.loads(result.to_json())["steps"]
    stored = json.loads(newest.read_text(encoding="utf-8"))["steps"]
    for key in ("status", "classes", "cause", "hints"):
        assert [s[key] for s in written] == [s[key] for s in stored]


def test_a_result_with_a_word_this_version_does_not_know_is_refused(tmp_path):
    from twicerun.result import Result, ResultFormatError

    newest = sorted((REPO / "results").glob("reference-*.json"))[-1]
    document = json.loads(newest.read_text(encoding="utf-8"))
    document["steps"][0]["status"] = "PROBABLY_FINE"
    try:
        Result.from_dict(document)
    except ResultFormatError as exc:
        assert "PROBABLY_FINE" in str(exc)
    else:
        raise AssertionError("an unknown status loaded")
