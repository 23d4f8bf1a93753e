"""`twicerun report`: tables from artifacts, into marker blocks, checked, with its exit codes."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from twicerun.github.baseline import BaselineError, parse
from twicerun.result import Environment, Result, StepResult, load_result

README = """# A project

Some prose.

<!-- twicerun:steps-p -->
<!-- /twicerun:steps-p -->

More prose.
"""


@pytest.fixture
def artifact(tmp_path) -> Path:
    result = Result(
        pipeline="pipelines/p.py",
        runs=3,
        contained=True,
        policy="strict",
        environment=Environment("2.0.1", 2, "Linux-x86_64", "3.11.7", "0.1.0"),
        seconds=1.5,
        steps=[
            StepResult(
                index=0, name="inputs", line=1, fired=0, compared=2, status="NO_DIVERGENCE_OBSERVED"
            ),
            StepResult(
                index=1,
                name="totals|evil<b>",
                line=4,
                fired=2,
                compared=2,
                status="DIVERGENT",
                classes=["VALUE_DRIFT"],
                cause="PARALLEL_ORDER",
            ),
        ],
    )
    path = tmp_path / "results" / "result.json"
    path.parent.mkdir()
    path.write_text(result.to_json())
    return path


@pytest.fixture
def readme(tmp_path) -> Path:
    path = tmp_path / "README.md"
    path.write_text(README)
    return path


def test_update_fills_the_block_and_check_then_passes(twicerun, artifact, readme):
    outcome = twicerun("report", artifact, "--update", readme)
    assert outcome.code == 0
    assert outcome.out == f"{readme}: rewrote steps-p\n"
    text = readme.read_text()
    assert "| 1 | `totals\\|evil<b>` | 2 of 2 | DIVERGENT | VALUE_DRIFT | PARALLEL_ORDER |" in text
    assert text.startswith(
        "# A project\n\nSome prose.\n\n<!-- twicerun:steps-p -->\n\nRendered by "
    )
    assert text.endswith("\n<!-- /twicerun:steps-p -->\n\nMore prose.\n")
    check = twicerun("report", artifact, "--check", readme)
    assert (check.code, check.out, check.err) == (0, "", "")
    again = twicerun("report", artifact, "--update", readme)
    assert (again.code, again.out) == (0, "")


def test_a_cell_edited_by_hand_is_stale(twicerun, artifact, readme):
    twicerun("report", artifact, "--update", readme)
    readme.write_text(readme.read_text().replace("| 2 of 2 |", "| 0 of 2 |"))
    outcome = twicerun("report", artifact, "--check", readme)
    assert outcome.code == 1
    assert outcome.err.startswith(
        f"{readme}: twicerun:steps-p is stale; run `twicerun report --update {readme}`\n"
    )
    assert "-| 1 | `totals\\|evil<b>` | 0 of 2 |" in outcome.err
    assert "+| 1 | `totals\\|evil<b>` | 2 of 2 |" in outcome.err


def test_a_block_nothing_renders_is_refused(twicerun, artifact, readme):
    twicerun("report", artifact, "--update", readme)
    readme.write_text(
        readme.read_text() + "\n<!-- twicerun:invented -->\n<!-- /twicerun:invented -->\n"
    )
    outcome = twicerun("report", artifact, "--check", readme)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {readme}: no artifact renders invented; remove those marker pairs or name the "
        f"artifact that renders them\n"
    )


def test_a_table_the_file_lost_is_refused(twicerun, artifact, readme):
    readme.write_text("# Only prose now\n")
    outcome = twicerun("report", artifact, "--check", readme)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {readme}: the artifacts render steps-p, which the file has no marker pair "
        f"for; put each pair, each marker on a line of its own, where its table should go: "
        f"<!-- twicerun:steps-p --> <!-- /twicerun:steps-p -->\n"
    )
    # --update refuses the same mismatch rather than writing half the tables.
    assert twicerun("report", artifact, "--update", readme).code == 2
    assert readme.read_text() == "# Only prose now\n"


def test_markers_that_do_not_pair_are_bad_input(twicerun, artifact, readme):
    readme.write_text("<!-- twicerun:steps-p -->\n")
    outcome = twicerun("report", artifact, "--check", readme)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {readme}:1: twicerun:steps-p is never closed; add <!-- /twicerun:steps-p --> "
        f"after it\n"
    )


def test_without_artifacts_the_newest_of_each_kind_in_results_is_used(
    twicerun, artifact, readme, monkeypatch
):
    monkeypatch.chdir(readme.parent)
    assert twicerun("report", "--update", "README.md").code == 0
    assert twicerun("report", "--check", "README.md").code == 0


def test_the_markdown_printed_is_what_a_file_needs_to_pass_the_check(twicerun, artifact, tmp_path):
    """Printed without the markers, a table pasted into a README was a block with no name,
    and the user had to find its name in another format to write the pair around it."""
    second = tmp_path / "second.json"
    document = json.loads(artifact.read_text())
    document["pipeline"] = document["pipeline"].replace("p.py", "q.py")
    second.write_text(json.dumps(document))
    printed = twicerun("report", artifact, second).out
    assert printed.startswith("<!-- twicerun:steps-p -->\n\nRendered by `twicerun report`")
    assert "\n<!-- /twicerun:steps-p -->\n\n<!-- twicerun:steps-q -->\n" in printed
    assert printed.endswith("\n<!-- /twicerun:steps-q -->\n")
    figures = tmp_path / "FIGURES.md"
    figures.write_text("# Figures\n\n" + printed)
    assert twicerun("report", artifact, second, "--check", figures).code == 0


def test_text_and_json_formats(twicerun, artifact):
    text = twicerun("report", artifact, "--format", "text").out
    assert "steps-p:" in text and "totals|evil<b>" in text
    document = json.loads(twicerun("report", artifact, "--format", "json").out)
    assert document[0]["name"] == "steps-p"
    assert document[0]["headers"] == ["", "step", "fired", "status", "classes", "cause"]


def test_an_artifact_of_an_unknown_kind_is_refused(twicerun, tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "someone.else/1"}))
    outcome = twicerun("report", path)
    assert outcome.code == 2
    assert outcome.err.startswith(
        f"twicerun: {path} has schema 'someone.else/1' and carries no tables, so nothing "
        "renders it; known: "
    )


@pytest.mark.parametrize(
    ("text", "what"),
    [("{}", "no schema field"), ("[1, 2]", "a JSON list, not an object")],
)
def test_an_artifact_without_a_schema_is_refused_saying_so(twicerun, tmp_path, text, what):
    # It said "has schema None", Python's word for a field that is not there; so did a
    # file in --results, a result.json that judge reads, and a baseline.
    path = tmp_path / "results" / "other.json"
    path.parent.mkdir()
    path.write_text(text)
    outcome = twicerun("report", path)
    assert outcome.code == 2
    assert outcome.err.startswith(f"twicerun: {path} has {what} and carries no tables")
    outcome = twicerun("report", "--results", path.parent)
    assert outcome.code == 2
    assert outcome.err.startswith(f"twicerun: {path} has {what}, which renders no table")
    with pytest.raises(BaselineError, match=re.escape(f"x is not a twicerun baseline ({what});")):
        parse(text, "x", "twicerun baseline update")


def test_an_artifact_that_carries_its_tables_renders_them_as_they_are(twicerun, tmp_path):
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "schema": "someone.else/2",
                "tables": [
                    {
                        "name": "mine",
                        "stamp": "Measured by a script.",
                        "headers": ["a", "b"],
                        "rows": [["1", "x|y"]],
                    }
                ],
            }
        )
    )
    outcome = twicerun("report", path)
    assert outcome.code == 0
    # Cells are Markdown as the script wrote them; a bare pipe is escaped so it cannot
    # split the cell.
    assert outcome.out == (
        "<!-- twicerun:mine -->\n\nMeasured by a script.\n\n| a | b |\n|---|---|\n| 1 | x\\|y |\n"
        "\n<!-- /twicerun:mine -->\n"
    )


def test_a_carried_table_whose_alignment_cannot_be_drawn_is_refused_naming_it(twicerun, tmp_path):
    """An alignment `report` has no mark for ("l") ended in an internal error."""
    path = tmp_path / "script.json"
    table = {"name": "mine", "stamp": "s", "headers": ["a", "b"], "rows": [["1", "2"]]}
    path.write_text(json.dumps({"schema": "x/1", "tables": [{**table, "align": ["l", "r"]}]}))
    outcome = twicerun("report", path)
    assert outcome.code == 2, outcome.err
    assert outcome.err.startswith(f"twicerun: {path} says it is x/1 but has the wrong shape")
    assert "table mine's align is ['l', 'r'], where each of its 2 columns takes one of" in (
        outcome.err
    )
    path.write_text(json.dumps({"schema": "x/1", "tables": [{**table, "align": ["left"]}]}))
    assert twicerun("report", path).code == 2


def _readme_with_a_stale_block(tmp_path, twicerun):
    result = tmp_path / "r.json"
    pipeline = tmp_path / "p.py"
    pipeline.write_text("def a(ctx):\n    ctx.write('x', 'SELECT 1 AS v')\n")
    assert twicerun("run", pipeline, "--runs", "2", "--json", result).code == 0
    stem = "p"
    text = f"# t\n\n<!-- twicerun:steps-{stem} -->\nold\n<!-- /twicerun:steps-{stem} -->\n"
    return result, text


def test_update_keeps_a_read_only_readme_read_only(twicerun, tmp_path):
    result, text = _readme_with_a_stale_block(tmp_path, twicerun)
    readme = tmp_path / "README.md"
    readme.write_text(text)
    readme.chmod(0o444)
    assert twicerun("report", result, "--update", readme).code == 0
    assert "old" not in readme.read_text()
    assert readme.stat().st_mode & 0o777 == 0o444


def test_update_through_a_symlink_rewrites_the_file_it_points_to(twicerun, tmp_path):
    result, text = _readme_with_a_stale_block(tmp_path, twicerun)
    real = tmp_path / "docs" / "README.md"
    real.parent.mkdir()
    real.write_text(text)
    link = tmp_path / "README.md"
    link.symlink_to(real)
    assert twicerun("report", result, "--update", link).code == 0
    assert link.is_symlink()
    assert "old" not in real.read_text()


def test_a_result_with_markup_in_its_words_cannot_break_the_table(twicerun, tmp_path):
    """A Result document is read as data: a status, cause or platform carrying a pipe or
    a tag is escaped (a pipe used to split the row), while twicerun's own words print
    without backslashes."""
    result = Result(
        pipeline="pipelines/p.py",
        runs=3,
        contained=True,
        policy="strict",
        environment=Environment("2.0.1", 2, "*bold*", "3.11.7", "0.1.0"),
        seconds=1.5,
        steps=[
            StepResult(
                index=0, name="a", line=1, fired=2, compared=2, status="<b>x</b>", cause="a|b"
            ),
            StepResult(
                index=1, name="b", line=4, fired=2, compared=2, status="DIVERGENT",
                classes=["VALUE_DRIFT"], cause="PARALLEL_ORDER",
            ),
        ],
    )  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(result.to_json())
    lines = twicerun("report", str(path)).out.splitlines()[2:]
    assert lines[0].endswith("DuckDB 2.0.1 at threads=2 on \\*bold\\*, 1.5s.")
    assert lines[4] == "| 0 | `a` | 2 of 2 | &lt;b&gt;x&lt;\\/b&gt; |  | a\\|b |"
    assert lines[5] == "| 1 | `b` | 2 of 2 | DIVERGENT | VALUE_DRIFT | PARALLEL_ORDER |"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d["steps"][0].update(fired="2"), "steps[0].fired is '2'"),
        (lambda d: d.update(environment=None), "environment is None"),
        (lambda d: d.update(steps=[5]), "steps[0] is 5"),
    ],
    ids=["count-a-string", "environment-null", "step-a-number"],
)
def test_a_result_holding_a_value_of_the_wrong_type_is_refused_naming_it(
    twicerun, artifact, edit, said
):
    # Taken as it came, such a value passed the reading and failed wherever a renderer
    # first used it: a traceback and exit 3, or a table with the wrong figure in it.
    document = json.loads(artifact.read_text())
    edit(document)
    artifact.write_text(json.dumps(document))
    outcome = twicerun("report", artifact)
    assert outcome.code == 2, outcome.err
    assert said in outcome.err and "not of the type twicerun writes there" in outcome.err


def test_a_pipeline_whose_file_name_no_marker_could_hold_gets_a_table_one_can(
    twicerun, artifact, tmp_path
):
    """`pipé line.py` rendered a table named `steps-pipé line`, and no marker pair could
    name it: the space, and then the é, were outside the names a marker held."""
    result = load_result(artifact)
    step = replace(result.steps[0], name="集計", compared=1)
    renamed = replace(result, pipeline="pipelines/pipé line, v2.py", steps=[step])
    artifact.write_text(renamed.to_json())
    readme = tmp_path / "README.md"
    readme.write_bytes(
        "# Ü\r\n\r\n<!-- twicerun:steps-pipé-line-v2 -->\r\n<!-- /twicerun:steps-pipé-line-v2 -->\r\n".encode()
    )
    assert (
        twicerun("report", artifact, "--format", "json").json()[0]["name"] == "steps-pipé-line-v2"
    )
    assert twicerun("report", artifact, "--update", readme).code == 0
    written = readme.read_bytes().decode()
    assert "| 0 | `集計` | 0 of 1 | NO_DIVERGENCE_OBSERVED |  |  |\r\n" in written
    assert twicerun("report", artifact, "--check", readme).code == 0


def test_a_doc_holding_some_of_the_tables_is_told_the_command_that_checks_it(
    twicerun, artifact, readme, monkeypatch
):
    """A doc beside the README holds a few tables; checked against the newest artifact of
    every kind, it was refused with a marker pair to paste for each of the others (forty on
    this repository's docs), and no word of the command that checks just its own."""
    other = json.loads(artifact.read_text())
    other["pipeline"] = "pipelines/q.py"
    (artifact.parent / "other.json").write_text(json.dumps(other))
    monkeypatch.chdir(readme.parent)
    twicerun("report", "results/result.json", "--update", "README.md")
    outcome = twicerun("report", "--check", "README.md")
    assert outcome.code == 2
    assert outcome.err == (
        "twicerun: README.md: the artifacts render steps-q, which the file has no marker pair "
        "for; if it is meant to hold only the tables it has, name the artifacts that render "
        "them (`twicerun report results/result.json --check README.md`); otherwise put each "
        "pair, each marker on a line of its own, where its table should go: "
        "<!-- twicerun:steps-q --> <!-- /twicerun:steps-q -->\n"
    )
    assert twicerun("report", "results/result.json", "--check", "README.md").code == 0


def test_an_invocation_directory_renders_its_result_and_another_directory_is_told_why(
    twicerun, artifact, tmp_path
):
    """The directory `twicerun run` prints was refused with click's "File '...' is a
    directory", which left the user to guess that its result.json was wanted."""
    invocation = tmp_path / ".twicerun" / "20261206-131930-d360"
    invocation.mkdir(parents=True)
    (invocation / "result.json").write_bytes(artifact.read_bytes())
    assert (
        twicerun("report", invocation, "--format", "text").out
        == twicerun("report", invocation / "result.json", "--format", "text").out
    )
    # A run directory stands for its newest completed invocation, as for judge and diff.
    (invocation / "invocation.json").write_text('{"outcome": "completed", "started": 1.0}')
    assert (
        twicerun("report", invocation.parent, "--format", "text").out
        == twicerun("report", invocation / "result.json", "--format", "text").out
    )
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    refused = twicerun("report", empty)
    assert refused.code == 2
    assert refused.err.strip() == (
        f"twicerun: {empty} is a directory and holds no result.json; name the JSON artifacts to "
        "render, or give the directory with --results to render the newest of each kind in it"
    )
