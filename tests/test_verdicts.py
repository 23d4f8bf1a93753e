"""`diff`, `localize`, `reproduce` and `audit` through the real CLI: every verdict and every
exit code, on small pipelines built for each, and the three vocabularies kept apart."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest
from conftest import FILLS_A_DICT

from twicerun.storage.layout import MANIFEST_NAME
from twicerun.storage.receipts import RECEIPT_NAME

# Step 1 differs on every run; step 2 carries the difference on; step 3 only counts
# rows, so it agrees again; step 4 reads nothing that moved.
LADDER = """
def base(ctx):
    ctx.write("base", "SELECT range AS id FROM range(20)")


def noisy(ctx):
    ctx.read("base")
    ctx.write("noise", "SELECT id, random() AS r FROM base")


def carried(ctx):
    ctx.read("noise")
    ctx.write("doubled", "SELECT id, r * 2 AS r2 FROM noise")


def counted(ctx):
    ctx.read("noise")
    ctx.write("how_many", "SELECT count(*) AS n FROM noise")


def apart(ctx):
    ctx.read("base")
    ctx.write("evens", "SELECT id FROM base WHERE id % 2 = 0")
"""

STEADY = """
def first(ctx):
    ctx.write("numbers", "SELECT range AS n FROM range(50)")


def second(ctx):
    ctx.read("numbers")
    ctx.write("total", "SELECT sum(n) AS s FROM numbers")
"""


def _invocations(run_dir: Path) -> list[Path]:
    return sorted(
        (p for p in run_dir.iterdir() if (p / MANIFEST_NAME).is_file()),
        key=lambda p: json.loads((p / MANIFEST_NAME).read_text())["started"],
    )


def record(twicerun, path, run_dir, *extra) -> Path:
    """One recorded invocation of `path`; every invocation is kept (--keep 0)."""
    outcome = twicerun("run", path, "--runs", "2", "--keep", "0", *extra)
    assert outcome.code in (0, 1), outcome.err
    return _invocations(run_dir)[-1]


def diffed_once_set(twicerun, path, run_dir, monkeypatch, variable: str, value: str) -> str:
    """The line under diff's first difference between two recordings of `path`, the second
    with the environment variable `variable` set to `value`."""
    a = record(twicerun, path, run_dir, "--no-amplify")
    monkeypatch.setenv(variable, value)
    b = record(twicerun, path, run_dir, "--no-amplify")
    outcome = twicerun("diff", a, b)
    assert outcome.code == 1
    return outcome.out.splitlines()[2]


def by_step(outcome) -> dict[str, dict]:
    """A verb's --json steps, by step name."""
    return {s["name"]: s for s in outcome.json()["steps"]}


def receipt_path(invocation: Path, run: int, index: int) -> Path:
    (step,) = (invocation / "loop" / str(run)).glob(f"{index:02d}-*")
    return step / RECEIPT_NAME


def edit_receipt(invocation: Path, run: int, index: int, **changes) -> None:
    path = receipt_path(invocation, run, index)
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


AUDIT_WORDS = re.compile(r"\b(deterministic|reproducible)\b")
LADDER_WORDS = re.compile(r"FIRST DIFFERENCE|COULD NOT CHECK|\bdownstream\b|\breconverged\b")


# diff ---------------------------------------------------------------------------------


def test_diff_of_two_invocations_walks_the_whole_ladder(twicerun, write_pipeline, run_dir):
    path = write_pipeline(LADDER)
    a = record(twicerun, path, run_dir)
    b = record(twicerun, path, run_dir)
    outcome = twicerun("diff", a, b, "--json", "-")
    assert outcome.code == 1, outcome.err
    document = outcome.json()
    assert document["schema"] == "twicerun.diff/1" and document["result"] == "diverged"
    assert [(s["name"], s["verdict"]) for s in document["steps"]] == [
        ("base", "same"),
        ("noisy", "FIRST DIFFERENCE"),
        ("carried", "downstream"),
        ("counted", "reconverged"),
        # After the first difference a match is reconverged by position, related or not.
        ("apart", "reconverged"),
    ]
    first = document["steps"][1]
    # The oracle says how: both run 1 copies are on disk.
    assert (
        "noise: VALUE_DRIFT" in first["explanation"]
        and "float values moved" in first["explanation"]
    )
    assert first["inputs"] == "identical"
    text = twicerun("diff", a, b)
    assert "diverged with identical inputs" in text.out
    # One reconverged step recovered from the difference, the other never met it.
    lines = text.out.splitlines()
    counted = next(i for i, line in enumerate(lines) if " counted " in line)
    assert lines[counted + 1] == "       its inputs differ: noise"
    apart = next(i for i, line in enumerate(lines) if " apart " in line)
    assert lines[apart + 1] == "       by position only: nothing it read through ctx differs"
    assert not AUDIT_WORDS.search(text.out)


def test_a_step_that_also_reads_its_own_state_still_names_the_input_that_moved(
    twicerun, write_pipeline, run_dir
):
    """A ctx.state read of its initial query has no digest; that unknown used to hide the
    ctx.read input beside it that was known to differ ("its inputs" printed nothing)."""
    path = write_pipeline(
        LADDER
        + """

def appended(ctx):
    ctx.read("noise")
    ctx.state("log", "SELECT * FROM noise WHERE false")
    ctx.write("log", "SELECT * FROM log UNION ALL SELECT * FROM noise")
"""
    )
    a = record(twicerun, path, run_dir)
    b = record(twicerun, path, run_dir)
    appended = twicerun("diff", a, b, "--json", "-").json()["steps"][-1]
    assert (appended["verdict"], appended["inputs"]) == ("downstream", "differ: noise")


def test_diff_of_two_runs_inside_one_invocation(twicerun, write_pipeline, run_dir):
    a = record(twicerun, write_pipeline(LADDER), run_dir)
    outcome = twicerun("diff", a, f"{a}#2", "--json", "-")
    verdicts = [s["verdict"] for s in outcome.json()["steps"]]
    # Contained: run 2 read run 1's noise, so what follows it agrees again.
    assert verdicts == ["same", "FIRST DIFFERENCE", "reconverged", "reconverged", "reconverged"]
    assert outcome.code == 1


def test_identical_runs_with_a_changed_instrument_are_same_with_an_annotation(
    twicerun, write_pipeline, run_dir
):
    path = write_pipeline(STEADY)
    a = record(twicerun, path, run_dir)
    # The step's code changes (a comment), and so does the recorded DuckDB: neither is a verdict.
    path.write_text(path.read_text().replace('ctx.read("numbers")', 'ctx.read("numbers")  # again'))
    b = record(twicerun, path, run_dir)
    edit_receipt(b, 1, 0, duckdb="0.0.1")
    outcome = twicerun("diff", a, b, "--json", "-")
    assert outcome.code == 0 and outcome.json()["result"] == "identical"
    first, second = outcome.json()["steps"]
    assert (first["verdict"], second["verdict"]) == ("same", "same")
    assert any(i.startswith("DuckDB version (") and "0.0.1" in i for i in first["instrument"])
    assert any(i.startswith("the step's code (") for i in second["instrument"])
    assert not any("code" in i for i in first["instrument"])
    text = twicerun("diff", a, b).out
    assert "produced differently: the step's code" in text


def test_an_older_receipt_or_a_pruned_copy_is_could_not_check_never_a_pass(
    twicerun, write_pipeline, run_dir, tmp_path
):
    path = write_pipeline(STEADY)
    a = record(twicerun, path, run_dir)
    b = tmp_path / "copied"
    shutil.copytree(record(twicerun, path, run_dir), b)  # a run directory travels
    # Step 1: written by a twicerun that did not name its rows, and the file is gone.
    data = json.loads(receipt_path(b, 1, 1).read_text())
    data["artifacts"][0]["canonical_digest"] = ""
    data.pop("version")
    receipt_path(b, 1, 1).write_text(json.dumps(data))
    (b / data["artifacts"][0]["file"]).unlink()
    outcome = twicerun("diff", a, b, "--json", "-")
    assert outcome.code == 4 and outcome.json()["result"] == "could not check"
    first, second = outcome.json()["steps"]
    assert first["verdict"] == "same"
    assert second["verdict"] == "COULD NOT CHECK" and "is gone" in second["why"]
    # A receipt from a newer twicerun, and one that is not JSON.
    edit_receipt(b, 1, 1, version=99)
    assert "version 99" in twicerun("diff", a, b, "--json", "-").json()["steps"][1]["why"]
    receipt_path(b, 1, 0).write_text("{not json")
    steps = twicerun("diff", a, b, "--json", "-").json()["steps"]
    assert steps[0]["verdict"] == "COULD NOT CHECK" and "cannot be read" in steps[0]["why"]


def test_different_step_lists_are_not_comparable(twicerun, write_pipeline, run_dir):
    a = record(twicerun, write_pipeline(STEADY, "one.py"), run_dir)
    two = write_pipeline(LADDER, "two.py")
    b = record(twicerun, two, run_dir)
    outcome = twicerun("diff", a, b)
    assert outcome.code == 2 and outcome.out.startswith("not comparable")
    # Why is said once, before the steps; "no such step" under each left it to be inferred.
    reason = outcome.out.splitlines()[1]
    assert reason.startswith("  they record two pipelines, ") and reason.endswith(
        f"one.py and {two}: the first run's steps are "
        "first, second; the second's are base, noisy, carried, counted, apart"
    )
    document = twicerun("diff", a, b, "--json", "-").json()
    assert document["reason"] == reason.strip()
    # Every step of both runs is listed once, in order; the second run's steps at the first
    # run's positions used to be left out.
    assert [(s["index"], s["name"]) for s in document["steps"]] == [
        (0, "first"),
        (0, "base"),
        (1, "second"),
        (1, "noisy"),
        (2, "carried"),
        (3, "counted"),
        (4, "apart"),
    ]
    assert all(s["verdict"] == "COULD NOT CHECK" for s in document["steps"])

    # One pipeline whose steps changed between its two runs, named another way the second
    # time (it is the same file).
    one = write_pipeline(STEADY + "\n\ndef third(ctx):\n    pass\n", "one.py")
    c = record(twicerun, f"{one.parent}/../{one.parent.name}/{one.name}", run_dir)
    assert twicerun("diff", a, c).out.splitlines()[1] == (
        "  the pipeline's steps changed between the two runs: the first run's steps are first, "
        "second; the second's are first, second, third"
    )

    # A step inserted before `second` moves it: each side has it, at another position, and
    # "the second run has no such step" said it was gone.
    one = write_pipeline(
        STEADY.replace("def second(", "def inserted(ctx):\n    pass\n\n\ndef second("), "one.py"
    )
    d = record(twicerun, one, run_dir)
    steps = twicerun("diff", a, d, "--json", "-").json()["steps"]
    assert [(s["index"], s["name"], s["why"]) for s in steps] == [
        (0, "first", ""),
        (1, "second", "the second run has it as step 2; the steps before it changed"),
        (1, "inserted", "the first run has no such step"),
        (2, "second", "the first run has it as step 1; the steps before it changed"),
    ]


def test_a_run_that_stopped_early_is_cut_short_not_a_pipeline_with_other_steps(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    """An invocation whose step raised holds the steps it reached. diff called that
    "not comparable: the pipeline's steps changed" (exit 2), sending the reader to look
    for an edit that was never made."""
    path = write_pipeline(
        "import os\n\n\n"
        'def first(ctx):\n    if os.environ.get("BREAK"):\n        raise RuntimeError("boom")\n'
        '    ctx.write("numbers", "SELECT range AS n FROM range(50)")\n\n\n'
        'def second(ctx):\n    ctx.read("numbers")\n'
        '    ctx.write("total", "SELECT sum(n) AS s FROM numbers")\n'
    )
    a = record(twicerun, path, run_dir)
    monkeypatch.setenv("BREAK", "1")
    assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 3
    b = _invocations(run_dir)[-1]
    outcome = twicerun("diff", a, b)
    assert outcome.code == 4, outcome.out
    assert outcome.out.splitlines() == [
        f"could not check: {a} against {b}",
        "  the second run stopped early: its invocation failed: step 0 first raised in run 1 "
        f"(at {path}:6): RuntimeError: boom",
        "   0 first   COULD NOT CHECK",
        "       second: it raised in this run",
        "   1 second  COULD NOT CHECK",
        "       the second run stopped before this step",
    ]
    assert twicerun("diff", b, a, "--json", "-").json()["steps"][1]["why"] == (
        "the first run stopped before this step"
    )
    # A step that raised inside ctx.source read nothing on that side: that is its failure,
    # not an input that differs.
    sourced = write_pipeline(
        "import os\n\n\n"
        'def load(ctx):\n    ctx.source("raw", os.environ.get("LANDING", "in/*.csv"))\n'
        '    ctx.write("rows", "SELECT * FROM raw")\n',
        "sourced.py",
    )
    (sourced.parent / "in").mkdir()
    (sourced.parent / "in" / "a.csv").write_text("id\n1\n2\n")
    (sourced.parent / "bad").mkdir()
    (sourced.parent / "bad" / "a.parquet").write_text("not Parquet at all")
    monkeypatch.chdir(sourced.parent)
    good = record(twicerun, sourced, run_dir)
    monkeypatch.setenv("LANDING", "bad/*.parquet")
    assert twicerun("run", sourced, "--runs", "2", "--keep", "0").code == 3
    lines = twicerun("diff", good, _invocations(run_dir)[-1]).out.splitlines()
    assert lines[1:3] == ["   0 load  COULD NOT CHECK", "       second: it raised in this run"]
    assert not any("inputs differ" in line for line in lines)
    # A run killed without a word, once a later invocation has reaped it, says so.
    manifest = json.loads((b / MANIFEST_NAME).read_text())
    (b / MANIFEST_NAME).write_text(json.dumps({**manifest, "outcome": "killed", "error": None}))
    assert twicerun("diff", a, b).out.splitlines()[1] == (
        "  the second run stopped early: its invocation was killed"
    )
    # An edit past the step where a run stopped cannot be seen in what the run reached:
    # the steps it never reached are not checked, and nothing is called same.
    path.write_text(path.read_text().replace("def second(", "def renamed("))
    assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 3
    outcome = twicerun("diff", a, _invocations(run_dir)[-1])
    assert outcome.code == 4, outcome.out


def test_diff_says_which_columns_moved_and_that_a_list_only_came_back_in_another_order(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    """diff counted the rows only on one side and stopped there; run's report already said
    which columns moved. The first difference now says it too."""
    path = write_pipeline(
        "import os\n\n\n"
        "def collect(ctx):\n"
        '    order = os.environ.get("ORDER", "ASC")\n'
        "    ctx.write(\n"
        '        "lists",\n'
        '        f"SELECT g, g * 10 AS tag, list(id ORDER BY id {order}) AS ids, "\n'
        "        f\"string_agg(id::VARCHAR, ',' ORDER BY id {order}) AS s \"\n"
        '        "FROM (SELECT range AS id, range % 3 AS g FROM range(12)) GROUP BY g",\n'
        "    )\n"
    )
    assert diffed_once_set(twicerun, path, run_dir, monkeypatch, "ORDER", "DESC") == (
        "       lists: ROW_MISSING, ROW_EXTRA; 3 rows only in the first, 3 rows only in the "
        "second (of 3 and 3); they pair once ids and s are left out together; ids holds the "
        "same elements in another order"
    )


def test_diff_names_the_other_artifacts_of_the_step_that_differ(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    """diff explains one artifact of the first difference, and said nothing of the others: a
    step whose five artifacts all moved read as if only the first had. The others are named
    from their digests, with no oracle run on them; one that did not move is not named."""
    path = write_pipeline(
        "import os\n\n\n"
        "def fan_out(ctx):\n"
        '    shift = int(os.environ.get("SHIFT", "0"))\n'
        '    ctx.write("steady", "SELECT 1 AS v")\n'
        "    for k in range(5):\n"
        '        ctx.write(f"part_{k}", f"SELECT {k + shift} AS v")\n'
    )
    assert diffed_once_set(twicerun, path, run_dir, monkeypatch, "SHIFT", "1") == (
        "       part_0: ROW_MISSING, ROW_EXTRA; 1 row only in the first, 1 row only in the "
        "second (of 1 and 1); part_1, part_2, part_3 and 1 more differ too"
    )


def test_diff_says_which_floats_differ_on_the_rows_a_column_pairs(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    """Another version of each customer picked: diff blamed the name alone."""
    path = write_pipeline(
        "import os\n\n\n"
        "def latest(ctx):\n"
        '    sign = os.environ.get("SIGN", "")\n'
        "    ctx.write(\n"
        '        "latest",\n'
        '        f"SELECT cust, arg_max(name, {sign}range) AS name, arg_max(bal, {sign}range) AS bal "\n'
        "        f\"FROM (SELECT range, range % 3 AS cust, 'n' || range AS name, (range * 1.5)::DOUBLE AS bal \"\n"
        '        "FROM range(9)) GROUP BY cust",\n'
        "    )\n"
    )
    assert diffed_once_set(twicerun, path, run_dir, monkeypatch, "SIGN", "-") == (
        "       latest: ROW_MISSING, ROW_EXTRA; 3 rows only in the first, 3 rows only in the "
        "second (of 3 and 3); they pair once name is left out; bal differs on them too"
    )


@pytest.mark.parametrize(
    "args",
    [["diff", "nowhere", "nowhere"], ["diff", "only-one"], ["localize"], ["reproduce", "nowhere"]],
    ids=["missing-run", "missing-argument", "localize-nothing", "reproduce-missing"],
)
def test_a_refusal_is_exit_3_for_the_ladder_verbs(twicerun, args):
    outcome = twicerun(*args)
    assert outcome.code == 3, outcome.err
    assert outcome.err.strip()


def test_a_run_number_that_does_not_exist_is_refused_with_the_ones_that_do(
    twicerun, write_pipeline, run_dir
):
    a = record(twicerun, write_pipeline(STEADY), run_dir)
    outcome = twicerun("diff", a, f"{a}#7")
    assert outcome.code == 3 and "no run 7; its runs are 1, 2" in outcome.err


def test_an_invocation_named_as_ls_shows_it_is_refused_with_the_path_to_give(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    a = record(twicerun, write_pipeline(STEADY), run_dir)
    monkeypatch.chdir(run_dir.parent)
    outcome = twicerun("diff", f"{a.name}#1", f"{a.name}#2")
    assert outcome.code == 3
    assert outcome.err == (
        f"twicerun: refused: {a.name} does not exist here; the invocation of that name is "
        f".twicerun/{a.name}, so give .twicerun/{a.name}#1\n"
    )


KEEP_REMOVED = (
    "a later `twicerun run` of the same pipeline in the same run directory removed it when it "
    "completed, since each one keeps only that pipeline's newest completed invocations there "
    "(--keep, 1 by default); record a run you mean to compare later with --keep 0, or in a "
    "--run-dir of its own"
)


@pytest.mark.parametrize("verb", ["diff", "localize", "reproduce"])
def test_a_run_that_keep_removed_is_refused_saying_so_and_a_typo_is_not(
    twicerun, write_pipeline, run_dir, monkeypatch, verb
):
    """Yesterday's run, recorded at the default --keep 1, is gone once today's completes in
    the same run directory; the verbs said only "does not exist", and the user was left to
    wonder whether they had mistyped it."""
    path = write_pipeline(STEADY)
    twicerun("run", path, "--runs", "2")
    (yesterday,) = _invocations(run_dir)
    for _ in range(2):  # the record survives the invocation that made it being removed
        assert twicerun("run", path, "--runs", "2").code == 0
    assert not yesterday.exists()
    args = {"diff": [yesterday, run_dir], "localize": [yesterday], "reproduce": [yesterday]}
    outcome = twicerun(verb, *args[verb])
    assert outcome.code == 3
    assert outcome.err == f"twicerun: refused: {yesterday} does not exist: {KEEP_REMOVED}\n"
    # Named as `ls .twicerun` shows it, from the directory that holds .twicerun.
    monkeypatch.chdir(run_dir.parent)
    outcome = twicerun(verb, *[yesterday.name, *args[verb][1:]])
    assert outcome.err == f"twicerun: refused: {yesterday.name} does not exist: {KEEP_REMOVED}\n"
    # A name no invocation ever had is a plain miss.
    typo = run_dir / "20200101-000000-abcd"
    outcome = twicerun(verb, *[typo, *args[verb][1:]])
    assert outcome.err == (
        f"twicerun: refused: {typo} does not exist; give a recorded invocation directory\n"
    )
    # A file that exists was said not to: the pipeline file, given as if the verb ran it.
    outcome = twicerun(verb, *[path, *args[verb][1:]])
    assert (outcome.code, outcome.err) == (
        3,
        f"twicerun: refused: {path} is a file, not a recorded invocation; give the directory "
        f"`twicerun run` printed; to run the pipeline, `twicerun run {path}`\n",
    )


def test_a_run_named_by_its_directory_on_disk_is_that_run_and_a_path_deeper_says_what_to_give(
    twicerun, write_pipeline, run_dir
):
    # `ls` shows INV/loop/2, and that path was refused as "neither an invocation directory
    # nor a run directory", though it is run 2.
    a = record(twicerun, write_pipeline(LADDER), run_dir, "--runs", "3")
    outcome = twicerun("diff", a / "loop" / "1", a / "loop" / "3", "--json", "-")
    assert outcome.json() == twicerun("diff", a, f"{a}#3", "--json", "-").json() | {
        "a": str(a / "loop" / "1"),
        "b": str(a / "loop" / "3"),
    }
    assert outcome.code == 1
    by_directory = twicerun("reproduce", a / "loop" / "2", "--json", "-").json()
    by_number = twicerun("reproduce", f"{a}#2", "--json", "-").json()
    assert [(s["name"], s["verdict"]) for s in by_directory["steps"]] == [
        (s["name"], s["verdict"]) for s in by_number["steps"]
    ]
    refusals = {
        a / "loop" / "2" / "01-noisy": f"{a / 'loop' / '2' / '01-noisy'} is a step of run 2; "
        f"a run is compared whole, so give {a}#2",
        a / "loop": f"{a / 'loop'} is inside the invocation {a}, not a run of it; give {a} "
        f"for its run 1, or {a}#k for run k (its runs are 1, 2, 3)",
        a / "loop" / "4": f"{a} has no run 4; its runs are 1, 2, 3",
        f"{a / 'loop' / '2'}#3": f"{a / 'loop' / '2'}#3 names run 2 by its directory and run 3 "
        f"after '#'; give one of {a}#2 or {a}#3",
    }
    for named, message in refusals.items():
        outcome = twicerun("diff", named, a)
        assert (outcome.code, outcome.err) == (3, f"twicerun: refused: {message}\n")


def test_one_run_named_twice_is_refused_rather_than_called_identical(
    twicerun, write_pipeline, run_dir
):
    """`diff A A` printed `identical`, exit 0: true of any run and the mark of a slip, most
    often `localize` meant for one invocation's own runs."""
    a = record(twicerun, write_pipeline(STEADY), run_dir, "--no-amplify")
    tail = (
        f", and a run always matches itself; give another run (another invocation, or "
        f"{a}#k for its run k), or `twicerun localize {a}` to find where its own runs disagreed\n"
    )
    for verb, b, named in [
        ("diff", a, f"{a} is given twice"),
        ("localize", a / "loop" / "1", f"{a} and {a / 'loop' / '1'} are both run 1 of {a}"),
        ("diff", f"{a}#1", f"{a} and {a}#1 are both run 1 of {a}"),
    ]:
        outcome = twicerun(verb, a, b)
        assert (outcome.code, outcome.err) == (3, f"twicerun: refused: {named}{tail}")
    # A run directory names its newest completed invocation: that one, again.
    assert twicerun("diff", run_dir, a).code == 3
    assert twicerun("diff", a, f"{a}#2").code == 0


def test_a_step_not_in_the_pipeline_is_refused_listing_its_steps_in_their_order(
    twicerun, write_pipeline, run_dir
):
    """reproduce listed them from a set, in the order of this process's string hashes."""
    names = ["load", "clean", "join", "enrich", "score", "rank", "export", "audit_log"]
    path = write_pipeline(
        "".join(f"def {n}(ctx):\n    ctx.write('{n}_out', 'SELECT 1 AS v')\n\n\n" for n in names)
    )
    a = record(twicerun, path, run_dir, "--no-amplify")
    listed = ", ".join(names)
    outcome = twicerun("reproduce", a, "--step", "nosuch")
    assert (outcome.code, outcome.err) == (
        3,
        f"twicerun: refused: --step nosuch: {path} has no such step; its steps are {listed}\n",
    )
    outcome = twicerun("audit", path, "--step", "nosuch")
    assert outcome.err.endswith(f"has no such step; its steps are {listed}\n")


# localize -----------------------------------------------------------------------------


def test_localize_one_invocation_clean_and_located(twicerun, write_pipeline, run_dir):
    clean = record(twicerun, write_pipeline(STEADY, "steady.py"), run_dir)
    outcome = twicerun("localize", clean)
    # It said only "clean: <run>", which did not say what it had looked at.
    assert (outcome.code, outcome.out) == (
        0,
        f"clean: {clean}\n  run 2 agreed with run 1 on every step (2 steps)\n",
    )
    three = record(twicerun, write_pipeline(STEADY, "steady.py"), run_dir, "--runs", "3")
    assert twicerun("localize", three).out.splitlines()[1] == (
        "  runs 2 and 3 agreed with run 1 on every step (2 steps)"
    )
    noisy = record(twicerun, write_pipeline(LADDER, "ladder.py"), run_dir)
    outcome = twicerun("localize", noisy, "--json", "-")
    assert outcome.code == 1
    found = outcome.json()
    assert (found["result"], found["step"], found["index"]) == ("located", "noisy", 1)
    # The later copies were deleted once compared; how they differed comes from the Result.
    assert found["explanation"].startswith("VALUE_DRIFT, in 1 of 1 comparisons with run 1")
    assert found["schema"] == "twicerun.localize/1"
    # The runs that disagreed are a list in words: it read "runs 2, 3, 4 of 4".
    four = record(twicerun, write_pipeline(LADDER, "ladder.py"), run_dir, "--runs", "4")
    assert twicerun("localize", four).out.splitlines()[0] == (
        f"located: step 1 noisy of {four}: runs 2, 3 and 4 of 4 disagreed with run 1"
    )


def test_localize_and_reproduce_of_one_run_name_the_other_artifacts_that_differed(
    twicerun, write_pipeline, run_dir
):
    """From the Result, localize describes the first artifact that differed, and reproduce
    the first that its re-execution changed; neither named another: a step whose four
    artifacts all moved read as if one had. An unseeded draw moves all four on every
    execution, a re-execution in a fresh process too; the steady one is not named."""
    path = write_pipeline(
        "def fan_out(ctx):\n"
        '    ctx.write("steady", "SELECT 1 AS v")\n'
        "    for k in range(4):\n"
        '        ctx.write(f"part_{k}", "SELECT (random() * 1e15)::BIGINT AS v")\n'
    )
    noisy = record(twicerun, path, run_dir, "--no-amplify")
    found = twicerun("localize", noisy, "--json", "-").json()
    assert found["explanation"].startswith("ROW_MISSING, ROW_EXTRA, in 1 of 1 comparisons")
    assert found["explanation"].endswith(
        "; part_1, part_2 and part_3 differ too), as the invocation's Result recorded it"
    )
    lines = twicerun("reproduce", noisy).out.splitlines()
    assert lines[2] == (
        "       part_0: ROW_MISSING, ROW_EXTRA; 1 row only as recorded, 1 row only as "
        "re-executed (of 1 and 1); part_1, part_2 and part_3 differ too"
    )


def test_localize_two_runs_stops_at_the_first_difference(twicerun, write_pipeline, run_dir):
    path = write_pipeline(LADDER)
    a, b = record(twicerun, path, run_dir), record(twicerun, path, run_dir)
    outcome = twicerun("localize", a, b, "--json", "-")
    assert outcome.code == 1
    assert [s["verdict"] for s in outcome.json()["steps"]] == ["same", "FIRST DIFFERENCE"]
    assert "stopped at the first difference" in twicerun("localize", a, b).out


def test_localize_says_could_not_check_when_a_later_copy_cannot_be_named(
    twicerun, write_pipeline, run_dir
):
    a = record(twicerun, write_pipeline(STEADY), run_dir)
    data = json.loads(receipt_path(a, 2, 1).read_text())
    for artifact in data["artifacts"]:
        artifact.update(kept=False, same_as=None, canonical_digest="")
    receipt_path(a, 2, 1).write_text(json.dumps(data))
    outcome = twicerun("localize", a)
    assert outcome.code == 4 and outcome.out.startswith("could not check")


# reproduce ----------------------------------------------------------------------------


def test_reproduce_every_verdict_and_exit(twicerun, write_pipeline, run_dir):
    steady = record(twicerun, write_pipeline(STEADY, "steady.py"), run_dir)
    outcome = twicerun("reproduce", steady, "--json", "-")
    assert outcome.code == 0
    assert [s["verdict"] for s in outcome.json()["steps"]] == ["REPRODUCED", "REPRODUCED"]

    noisy = record(twicerun, write_pipeline(LADDER, "ladder.py"), run_dir)
    outcome = twicerun("reproduce", noisy, "--json", "-")
    assert outcome.code == 1
    verdicts = {s["name"]: s for s in outcome.json()["steps"]}
    assert verdicts["base"]["verdict"] == "REPRODUCED"
    assert verdicts["noisy"]["verdict"] == "DIVERGED"
    assert "VALUE_DRIFT" in verdicts["noisy"]["detail"]
    text = twicerun("reproduce", noisy).out
    assert not AUDIT_WORDS.search(text) and "REPRODUCED" in text

    # Nothing it executed went into the recorded run.
    before = sorted(p.name for p in (noisy / "loop" / "1").iterdir())
    twicerun("reproduce", noisy)
    assert sorted(p.name for p in (noisy / "loop" / "1").iterdir()) == before


def test_reproduce_a_step_that_raises_now_is_diverged_and_the_rest_are_checked(
    twicerun, write_pipeline, run_dir, tmp_path
):
    """It ended the command with exit 3 (refused: a run that cannot be read) and no verdict
    for any step, the ones before it included."""
    # What makes b raise now is something no receipt records (a file's existence), as
    # a service that went down would be; a variable it reads would be named instead.
    marker = tmp_path / "boom"
    path = write_pipeline(
        f"""
        from pathlib import Path


        def a(ctx):
            ctx.write("t", "SELECT 1 AS v")


        def b(ctx):
            ctx.read("t")
            if Path({str(marker)!r}).exists():
                raise RuntimeError("boom")
            ctx.write("u", "SELECT v FROM t")


        def c(ctx):
            ctx.read("t")
            ctx.write("w", "SELECT v + 1 AS v FROM t")
        """
    )
    recorded = record(twicerun, path, run_dir)
    marker.write_text("")
    outcome = twicerun("reproduce", recorded, "--json", "-")
    assert outcome.code == 1, outcome.err
    steps = outcome.json()["steps"]
    assert [s["verdict"] for s in steps] == ["REPRODUCED", "DIVERGED", "REPRODUCED"]
    assert steps[1]["detail"] == (
        f"it raised (at {path}:11), where the recorded run wrote its artifacts: RuntimeError: boom"
    )


def test_reproduce_could_not_check_changed_code_changed_duckdb_and_a_missing_input(
    twicerun, write_pipeline, run_dir
):
    path = write_pipeline(STEADY)
    run = record(twicerun, path, run_dir)
    edit_receipt(run, 1, 0, duckdb="0.0.1")
    outcome = twicerun("reproduce", run, "--json", "-")
    first, second = outcome.json()["steps"]
    assert first["verdict"] == "COULD NOT CHECK" and "DuckDB 0.0.1" in first["detail"]
    assert second["verdict"] == "REPRODUCED"
    assert outcome.code == 4

    data = json.loads(receipt_path(run, 1, 0).read_text())
    (run / data["artifacts"][0]["file"]).unlink()
    second = twicerun("reproduce", run, "--step", "second", "--json", "-").json()["steps"]
    assert [s["verdict"] for s in second] == ["COULD NOT CHECK"]
    assert "input numbers" in second[0]["detail"]

    path.write_text(path.read_text().replace("range(50)", "range(51)"))
    outcome = twicerun("reproduce", run, "--step", "first", "--json", "-")
    assert outcome.json()["steps"][0]["detail"] == "its code changed since it was recorded"
    assert outcome.code == 4


SEEDED = """
from twicerun import step


def first(ctx):
    ctx.write("numbers", "SELECT range AS n FROM range(50)")


@step(stochastic=True, seed="seed")
def sample(ctx, seed: int = 7):
    ctx.read("numbers")
    ctx.write("picked", f"SELECT n FROM numbers WHERE n % 10 = {seed}")


def last(ctx):
    ctx.read("numbers")
    ctx.write("total", "SELECT sum(n) AS s FROM numbers")
"""


def test_reproduce_a_run_whose_file_lost_or_renamed_a_step_says_so_never_all_reproduced(
    twicerun, write_pipeline, run_dir
):
    """A seeded step taken out of the file since refused the command with "--seed names
    sample", a flag nobody gave; and a step taken out or renamed was not listed at all, so
    the steps left could come out "every step reproduced", exit 0."""
    path = write_pipeline(SEEDED)
    run = record(twicerun, path, run_dir)
    path.write_text(SEEDED.replace("def last(", "def final("))
    outcome = twicerun("reproduce", run, "--json", "-")
    assert outcome.code == 4, outcome.err
    assert [
        (s["index"], s["name"], s["verdict"], s["detail"]) for s in outcome.json()["steps"]
    ] == [
        (0, "first", "REPRODUCED", ""),
        (1, "sample", "REPRODUCED", ""),
        (2, "final", "COULD NOT CHECK", "the recorded run's step 2 is last"),
        (
            2,
            "last",
            "COULD NOT CHECK",
            f"{path.name} has no step last now, so it was not re-executed",
        ),
    ]

    start = SEEDED.index("@step")
    path.write_text(SEEDED[:start] + SEEDED[SEEDED.index("def last(") :])
    outcome = twicerun("reproduce", run, "--json", "-")
    assert outcome.code == 4, outcome.err
    steps = [(s["name"], s["verdict"], s["detail"]) for s in outcome.json()["steps"]]
    # `last` is now step 1, where the record has `sample`: neither can be checked, and
    # where each is on the other side is said, not that it is gone.
    assert steps == [
        ("first", "REPRODUCED", ""),
        (
            "last",
            "COULD NOT CHECK",
            "the recorded run's step 1 is sample; it has this step as step 2: the steps "
            "before it changed",
        ),
        (
            "sample",
            "COULD NOT CHECK",
            f"{path.name} has no step sample now, so it was not re-executed",
        ),
        (
            "last",
            "COULD NOT CHECK",
            f"{path.name} has it as step 1 now: the steps before it changed, so it was not "
            "re-executed",
        ),
    ]
    path.write_text(SEEDED + '\n\ndef extra(ctx):\n    ctx.write("e", "SELECT 1 AS x")\n')
    outcome = twicerun("reproduce", run, "--json", "-")
    assert outcome.code == 4, outcome.err
    *same, added = outcome.json()["steps"]
    assert [s["verdict"] for s in same] == ["REPRODUCED"] * 3
    assert (added["name"], added["detail"]) == (
        "extra",
        "the recorded run has no step 3: the file has more steps now",
    )
    # --step names only steps of the file now, so nothing else is listed.
    only = twicerun("reproduce", run, "--step", "first", "--json", "-")
    assert only.code == 0 and [s["name"] for s in only.json()["steps"]] == ["first"]


def test_reproduce_of_a_run_whose_pipeline_moved_says_how_to_name_it(
    twicerun, write_pipeline, run_dir
):
    # It said only that the file did not exist, as if the user had typed it.
    path = write_pipeline(SEEDED)
    run = record(twicerun, path, run_dir)
    moved = path.rename(path.with_name("renamed.py"))
    outcome = twicerun("reproduce", run)
    assert (outcome.code, outcome.err) == (
        3,
        f"twicerun: refused: the pipeline {run} recorded, {path}, is no longer there; give "
        f"the file to re-execute with --pipeline FILE\n",
    )
    assert twicerun("reproduce", run, "--pipeline", moved).code == 0


def test_reproduce_a_run_that_stopped_says_so_for_the_steps_it_never_reached(
    twicerun, write_pipeline, run_dir
):
    """They said "no receipt to check against", as if a receipt had been lost."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def a(ctx):
            ctx.write("t", "SELECT 1 AS v")


        def b(ctx):
            ctx.read("t")
            if next(_calls) == 1:
                raise RuntimeError("second run")
            ctx.write("u", "SELECT v FROM t")


        def c(ctx):
            ctx.read("u")
            ctx.write("w", "SELECT v + 1 AS v FROM u")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--no-amplify")
    assert outcome.code == 3, outcome.err
    (invocation,) = _invocations(run_dir)
    steps = twicerun("reproduce", f"{invocation}#2", "--json", "-").json()["steps"]
    assert [(s["name"], s["verdict"], s["detail"]) for s in steps] == [
        ("a", "REPRODUCED", ""),
        ("b", "COULD NOT CHECK", "it raised when it was recorded"),
        ("c", "COULD NOT CHECK", "the recorded run stopped before this step"),
    ]


def test_a_run_recorded_in_another_time_zone_is_named_not_called_a_divergence(
    write_pipeline, tmp_path
):
    """DuckDB casts a TIMESTAMPTZ to a date or text in the machine's time zone, which nothing
    recorded: `reproduce` in another zone said DIVERGED, and `diff` of two runs recorded in
    two zones named no change in how the step was produced. Run in processes of their own,
    since the zone is the process's."""
    path = write_pipeline(
        "def hour(ctx):\n"
        "    ctx.write('h', \"SELECT strftime(TIMESTAMPTZ '2024-03-10 03:30:00+00', '%H') AS h\")\n"
    )

    def twicerun_in(zone: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "twicerun", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "TZ": zone},
        )

    recorded = []
    for zone in ("UTC", "Pacific/Chatham"):
        ran = twicerun_in(zone, "run", str(path), "--runs", "2", "--no-amplify", "--keep", "0")
        assert ran.returncode == 0, ran.stderr
        recorded.append(_invocations(tmp_path / ".twicerun")[-1])
    utc, chatham = recorded
    assert json.loads(receipt_path(utc, 1, 0).read_text())["time_zone"] == "UTC"

    elsewhere = twicerun_in("Pacific/Chatham", "reproduce", str(utc), "--json", "-")
    assert elsewhere.returncode == 4, elsewhere.stderr
    assert json.loads(elsewhere.stdout)["steps"][0]["detail"] == (
        "it was recorded in the time zone UTC; this session's is Pacific/Chatham "
        "(set TZ=UTC to check it)"
    )
    # Another name for the same zone is the same zone.
    assert twicerun_in("Etc/UTC", "reproduce", str(utc)).returncode == 0

    diff = twicerun_in("UTC", "diff", str(utc), str(chatham), "--json", "-")
    (step,) = json.loads(diff.stdout)["steps"]
    assert step["verdict"] == "FIRST DIFFERENCE"
    assert step["instrument"] == ["time zone (UTC against Pacific/Chatham)"]


def test_a_helper_module_edited_since_the_run_is_named_not_called_a_divergence(
    twicerun, write_pipeline, run_dir, tmp_path
):
    """A step's SQL came from helpers.py beside the pipeline; the helper was edited after the
    run. reproduce re-executed the step and called it DIVERGED, as if it could not repeat
    itself, and diff of a run before and after the edit named no change in how it was made."""
    helper = tmp_path / "helpers.py"
    helper.write_text('QUERY = "SELECT 1 AS v"\n')
    path = write_pipeline(
        """
        from helpers import QUERY


        def uses_it(ctx):
            ctx.write("x", QUERY)
        """
    )
    before = record(twicerun, path, run_dir)
    receipt = json.loads(receipt_path(before, 1, 0).read_text())
    assert list(receipt["modules"]) == ["helpers.py"]
    assert twicerun("reproduce", before).code == 0

    helper.write_text('QUERY = "SELECT 2 AS v"\n')
    outcome = twicerun("reproduce", before, "--json", "-")
    assert outcome.code == 4, outcome.out
    (step,) = outcome.json()["steps"]
    assert step["verdict"] == "COULD NOT CHECK"
    assert step["detail"] == (
        "helpers.py, which the pipeline imports from its directory, has changed since it was "
        "recorded"
    )

    after = record(twicerun, path, run_dir)
    (step,) = twicerun("diff", before, after, "--json", "-").json()["steps"]
    assert step["verdict"] == "FIRST DIFFERENCE"
    assert any(c.startswith("modules beside the pipeline (helpers.py ") for c in step["instrument"])

    # A receipt from before twicerun recorded these modules cannot vouch for them.
    data = json.loads(receipt_path(after, 1, 0).read_text())
    del data["modules"]
    receipt_path(after, 1, 0).write_text(json.dumps(data))
    (step,) = twicerun("reproduce", after, "--json", "-").json()["steps"]
    assert step["verdict"] == "COULD NOT CHECK" and "written by an older twicerun" in step["detail"]


USES_FROM_ITS_FILE = """
CUTOFF = {cutoff}
REGIONS = {{"north", "south", "east"}}


def query(n):
    return f"SELECT range AS i FROM range({{n}}) WHERE range < {{len(REGIONS)}} * 100"


def make(table, n):
    def load(ctx):
        ctx.write(table, query(n))

    load.__name__ = f"load_{{table}}"
    return load


def constant(ctx):
    ctx.write("c", f"SELECT range AS i FROM range({{CUTOFF}})")


def untouched(ctx):
    ctx.write("u", "SELECT 1 AS v")


STEPS = [constant, make("m", {made}), untouched]
"""


def test_a_constant_a_function_or_a_closure_of_the_pipeline_file_edited_is_named(
    twicerun, write_pipeline, run_dir
):
    """A step that reads a constant of its file, or was made by a factory there, had a code
    digest of its own source only: after the constant (or the factory's argument) was
    edited, reproduce called it DIVERGED and diff "diverged with identical inputs", as if
    the step had stopped repeating itself."""
    path = write_pipeline(USES_FROM_ITS_FILE.format(cutoff=10, made=5))
    before = record(twicerun, path, run_dir)
    receipt = json.loads(receipt_path(before, 1, 1).read_text())
    assert sorted(receipt["uses"]) == ["REGIONS", "n", "query", "table"]
    assert json.loads(receipt_path(before, 1, 2).read_text())["uses"] == {}
    assert twicerun("reproduce", before).code == 0

    path.write_text(textwrap.dedent(USES_FROM_ITS_FILE.format(cutoff=12, made=7)))
    outcome = twicerun("reproduce", before, "--json", "-")
    assert outcome.code == 4, outcome.out
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    assert steps["constant"]["verdict"] == "COULD NOT CHECK"
    assert steps["constant"]["detail"] == (
        "CUTOFF, which it uses from the pipeline file, has changed since it was recorded"
    )
    assert steps["load_m"]["detail"] == (
        "n, which it uses from the pipeline file, has changed since it was recorded"
    )
    assert steps["untouched"]["verdict"] == "REPRODUCED"

    after = record(twicerun, path, run_dir)
    steps = by_step(twicerun("diff", before, after, "--json", "-"))
    assert steps["constant"]["verdict"] == "FIRST DIFFERENCE"
    assert any(
        c.startswith("what it uses from the pipeline file (CUTOFF ")
        for c in steps["constant"]["instrument"]
    )
    assert steps["untouched"]["instrument"] == []
    # In words, the step is not said to have diverged on its own: with nothing it read
    # differing, the line names what produced it instead.
    lines = twicerun("diff", before, after).out.splitlines()
    at = next(i for i, line in enumerate(lines) if " constant " in line)
    assert lines[at + 1] == "       c: ROW_EXTRA; 2 rows only in the second (of 10 and 12)"
    assert lines[at + 2] == "       nothing it read through ctx differs, but what produced it does"
    assert lines[at + 3].startswith("       produced differently: what it uses from the pipe")
    assert "diverged with identical inputs" not in "\n".join(lines)

    # A receipt from before twicerun recorded them cannot vouch for them.
    data = json.loads(receipt_path(after, 1, 0).read_text())
    del data["uses"]
    receipt_path(after, 1, 0).write_text(json.dumps(data))
    steps = by_step(twicerun("reproduce", after, "--json", "-"))
    assert steps["constant"]["detail"] == (
        "its receipt records no digest of CUTOFF, which it uses from the pipeline file "
        "(written by an older twicerun)"
    )


def named_not_blamed(twicerun, path, run_dir, before, steps, detail, instrument) -> Path:
    """After an edit outside the step's code: reproduce says what changed (COULD NOT CHECK)
    of the first step and re-executes the second, and a run recorded now is told apart
    from `before` by diff with the same thing named. Returns that run."""
    changed, untouched = steps
    found = by_step(twicerun("reproduce", before, "--json", "-"))
    assert (found[changed]["verdict"], found[changed]["detail"]) == ("COULD NOT CHECK", detail)
    assert found[untouched]["verdict"] == "REPRODUCED"
    after = record(twicerun, path, run_dir)
    found = by_step(twicerun("diff", before, after, "--json", "-"))
    assert any(c.startswith(instrument) for c in found[changed]["instrument"])
    return after


SQL_IN_FILES = """
from pathlib import Path

MODELS = Path(__file__).parent / "models"


def orders(ctx):
    ctx.write("orders", (MODELS / "orders.sql").read_text())


def listed(ctx):
    ctx.source("raw", str(Path(__file__).parent / "raw.csv"))
    ctx.write("raw_copy", "SELECT * FROM raw")


def counted(ctx):
    ctx.read("orders")
    ctx.write("n", "SELECT count(*) AS n FROM orders")
"""


def test_a_file_beside_the_pipeline_that_a_step_reads_and_was_edited_is_named(
    twicerun, write_pipeline, run_dir, tmp_path
):
    """SQL kept in a .sql file and read when the step runs: after the file was edited,
    reproduce called the step DIVERGED and diff said it diverged with identical inputs."""
    (tmp_path / "models").mkdir()
    sql = tmp_path / "models" / "orders.sql"
    sql.write_text("SELECT range AS id FROM range(10)\n")
    (tmp_path / "raw.csv").write_text("a,b\n1,2\n")
    path = write_pipeline(SQL_IN_FILES)
    before = record(twicerun, path, run_dir)
    recorded = json.loads(receipt_path(before, 1, 0).read_text())["opened"]
    assert list(recorded) == ["models/orders.sql"]
    # A file named through ctx.source has a record of its own; nothing else was opened.
    assert json.loads(receipt_path(before, 1, 1).read_text())["opened"] == {}
    assert json.loads(receipt_path(before, 1, 2).read_text())["opened"] == {}
    assert twicerun("reproduce", before).code == 0

    sql.write_text("SELECT range AS id FROM range(12)\n")
    after = named_not_blamed(
        twicerun,
        path,
        run_dir,
        before,
        ("orders", "counted"),
        "models/orders.sql, which it read beside the pipeline, has changed since it was recorded",
        "files it read beside the pipeline (models/orders.sql ",
    )

    sql.unlink()
    steps = by_step(twicerun("reproduce", after, "--json", "-"))
    assert steps["orders"]["detail"] == (
        "models/orders.sql, which it read beside the pipeline when it was recorded, is gone"
    )


SIDE_DATABASE = """
import duckdb


def fill(ctx):
    con = duckdb.connect({side!r})
    con.execute("CREATE TABLE IF NOT EXISTS hits AS SELECT 0 AS n WHERE false")
    con.execute("INSERT INTO hits VALUES (1)")
    con.close()
    ctx.write("filled", "SELECT 1 AS done")


def counted(ctx):
    ctx.read("filled")
    ctx.sql("ATTACH {side!r} AS side (READ_ONLY)")
    ctx.write("hits", "SELECT count(*) AS n FROM side.hits")
"""


def test_a_file_read_past_ctx_that_changed_is_named_not_blamed(
    twicerun, write_pipeline, run_dir, tmp_path
):
    """A step counted the rows of a side database another step inserts into on every run:
    diff said it diverged with identical inputs, and reproduce called it DIVERGED, though
    what it read had changed under it."""
    side = str(tmp_path / "side.db")
    path = write_pipeline(SIDE_DATABASE.format(side=side))
    a = record(twicerun, path, run_dir, "--no-amplify")
    b = record(twicerun, path, run_dir, "--no-amplify")
    outcome = twicerun("diff", a, b)
    lines = outcome.out.splitlines()
    at = lines.index("   1 counted  FIRST DIFFERENCE")
    assert lines[at + 2] == "       nothing it read through ctx differs, but what produced it does"
    assert lines[at + 3].startswith(
        f"       produced differently: files of rows it read past ctx ({side} "
    )
    found = by_step(twicerun("reproduce", a, "--json", "-"))
    assert found["fill"]["verdict"] == "REPRODUCED"
    assert (found["counted"]["verdict"], found["counted"]["detail"]) == (
        "COULD NOT CHECK",
        f"{side}, which it read past ctx, has changed since it was recorded",
    )


def test_only_reads_of_data_beside_the_pipeline_are_recorded(tmp_path):
    from twicerun.runner.opened import recording

    pipeline_dir, run_dir = tmp_path / "repo", tmp_path / "repo" / ".twicerun"
    (pipeline_dir / "__pycache__").mkdir(parents=True)
    run_dir.mkdir()
    for name in ("q.sql", "helper.py", "out.txt", "__pycache__/x.pyc", ".twicerun/r.json"):
        (pipeline_dir / name).write_text("x")
    (tmp_path / "elsewhere.sql").write_text("x")
    with recording((pipeline_dir,), run_dir) as seen:
        for name in ("q.sql", "helper.py", "__pycache__/x.pyc", ".twicerun/r.json"):
            (pipeline_dir / name).read_bytes()
        (pipeline_dir / "out.txt").write_text("written, not read")
        (tmp_path / "elsewhere.sql").read_text()
        (pipeline_dir / "cache.json").write_text("{}")  # its own, read back: no input
        (pipeline_dir / "cache.json").read_text()
    with open(pipeline_dir / "q.sql") as f:  # after the step: not its read
        f.read()
    assert seen.digests(pipeline_dir, set()) == {
        "q.sql": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    }


def test_a_file_elsewhere_is_recorded_once_a_step_wrote_it(tmp_path):
    """A pickle one step left in /tmp for the next was read unseen, and the reading step
    kept PARALLEL_ORDER; a file elsewhere no step wrote (a library's) stays unrecorded."""
    from twicerun.runner.opened import recording

    pipeline_dir, run_dir = tmp_path / "repo", tmp_path / "repo" / ".twicerun"
    run_dir.mkdir(parents=True)
    handed, untouched = tmp_path / "cache.pkl", tmp_path / "library.dat"
    untouched.write_text("x")
    with recording((pipeline_dir,), run_dir) as writer:
        handed.write_text("x")
    assert writer.written_beside() == [str(handed)]
    with recording((pipeline_dir,), run_dir) as reader:
        handed.read_text()
        untouched.read_text()
    assert reader.digests(pipeline_dir, set()) == {
        str(handed): "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    }


FROM_THE_ENVIRONMENT = """
import os
import tempfile


def daily(ctx):
    day = os.environ.get("RUN_DATE", "2026-01-01")
    ctx.write("d", f"SELECT DATE '{day}' AS day")


def settings_of_a_library(ctx):
    tempfile.gettempdir()  # reads TMPDIR and the like, for itself
    ctx.write("x", "SELECT 1 AS v")


def copies_it(ctx):
    env = {**os.environ}
    ctx.write("n", f"SELECT {len(env) > 0} AS any")


def sets_its_own(ctx):
    os.environ["TWICERUN_TEST_SET_BY_THE_STEP"] = "on"
    ctx.write("o", f"SELECT '{os.environ['TWICERUN_TEST_SET_BY_THE_STEP']}' AS v")
"""


def test_an_environment_variable_a_step_reads_and_that_changed_is_named(
    twicerun, write_pipeline, run_dir, monkeypatch
):
    """A scheduled job takes its date from the environment: run again with another date,
    reproduce called the step DIVERGED and diff said it diverged with identical inputs."""
    monkeypatch.setenv("RUN_DATE", "2026-03-01")
    monkeypatch.delenv("TWICERUN_TEST_SET_BY_THE_STEP", raising=False)  # gone afterwards
    for name in [f"TWICERUN_FILLER_{i}" for i in range(40)]:
        monkeypatch.setenv(name, "x")
    path = write_pipeline(FROM_THE_ENVIRONMENT)
    before = record(twicerun, path, run_dir)
    receipt = receipt_path(before, 1, 0).read_text()
    assert list(json.loads(receipt)["environment"]) == ["RUN_DATE"]
    assert "2026-03-01" not in receipt  # a digest, never the value
    # What a library reads for itself is not the step's, and a copy of the whole
    # environment (for a subprocess, say) is no list of settings.
    assert json.loads(receipt_path(before, 1, 1).read_text())["environment"] == {}
    assert json.loads(receipt_path(before, 1, 2).read_text())["environment"] is None
    # A variable the step set itself was unset when it began, as it is for reproduce.
    os.environ.pop("TWICERUN_TEST_SET_BY_THE_STEP")
    assert twicerun("reproduce", before).code == 0

    monkeypatch.setenv("RUN_DATE", "2026-03-02")
    named_not_blamed(
        twicerun,
        path,
        run_dir,
        before,
        ("daily", "settings_of_a_library"),
        "RUN_DATE, which it read from the environment, has another value now",
        "environment variables it read (RUN_DATE ",
    )
    monkeypatch.delenv("RUN_DATE")
    steps = by_step(twicerun("reproduce", before, "--json", "-"))
    assert steps["daily"]["detail"] == "RUN_DATE, which it read from the environment, is unset now"


def test_a_path_beside_the_pipeline_is_named_from_there_so_a_moved_checkout_is_the_same():
    from twicerun.pipeline.uses import canonical

    base = "/home/ci/work/repo/pipelines"
    here = canonical(Path(base) / "data" / "orders.csv", base)
    assert here == canonical(
        Path("/tmp/elsewhere/pipelines/data/orders.csv"), "/tmp/elsewhere/pipelines"
    )
    assert canonical(base + "/data", base) == canonical("/x/data", "/x")
    # Anything else is itself: another directory, or text that only starts alike.
    assert canonical(Path("/etc/data"), base) == repr(Path("/etc/data"))
    assert canonical(base + "-old/data", base) == repr(base + "-old/data")


def test_a_lookup_table_too_large_to_record_is_given_up_before_its_items_are_read():
    """What a step reads from its file is digested before every execution, and a module
    dict of 100,000 entries was read entry by entry to find it too large: 33 ms an
    execution, for nothing recorded. Its size alone rules it out now; the text of what
    fits is as before."""
    from twicerun.pipeline.uses import BUDGET, canonical

    class Unread(dict):
        def items(self):
            raise AssertionError("read item by item")

    class UnreadList(list):
        def __iter__(self):
            raise AssertionError("read item by item")

    assert canonical(Unread({i: i for i in range(BUDGET)})) is None
    assert canonical(UnreadList(range(BUDGET + 1))) is None
    assert canonical({"a": [1, 2.5, None], "b": {3, 1}, "c": (1,)}) == (
        "dict{'a': list[1, 2.5, None], 'b': set{1, 3}, 'c': tuple[1]}"
    )
    assert canonical(list(range(BUDGET - 1))) is not None


def test_a_value_that_raises_when_looked_at_is_left_out_of_what_a_step_uses():
    from twicerun.pipeline.uses import step_uses

    class Proxy:
        @property
        def __class__(self):
            raise RuntimeError("lazy")

    PROXY = Proxy()
    LIMIT = 3

    def step(ctx):
        return PROXY, LIMIT

    assert list(step_uses(step)) == ["LIMIT"]


def test_what_a_step_uses_is_named_alike_in_every_process():
    """A set of strings iterates in an order that follows the string hash seed, which
    `audit` and every new process change: its digest must not."""
    code = (
        "from twicerun.pipeline.uses import canonical; "
        "print(canonical({'north', 'south', 'east', 'west', ('a', frozenset({'x', 'y'}))}))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("threads", "two", 'Receipt.threads: "two" is not int'),
        ("modules", "helpers.py", 'Receipt.modules: "helpers.py" is not an object'),
        ("artifacts", [{"name": "x"}], "ArtifactRecord.__init__() missing"),
        ("seconds", None, "Receipt.seconds: null where a value is needed"),
    ],
)
def test_a_receipt_with_a_value_of_the_wrong_type_cannot_be_checked_and_says_which(
    twicerun, write_pipeline, run_dir, field, value, named
):
    """A receipt edited by hand or copied from elsewhere crashed diff and reproduce
    (internal error, exit 3) wherever a verdict first touched the value."""
    path = write_pipeline(STEADY)
    a = record(twicerun, path, run_dir)
    b = record(twicerun, path, run_dir)
    edit_receipt(b, 1, 0, **{field: value})
    outcome = twicerun("diff", a, b, "--json", "-")
    assert outcome.code == 4, outcome.err
    first = outcome.json()["steps"][0]
    assert first["verdict"] == "COULD NOT CHECK" and named in first["why"], first
    outcome = twicerun("reproduce", b, "--json", "-")
    assert outcome.code == 4, outcome.err
    first = outcome.json()["steps"][0]
    assert first["verdict"] == "COULD NOT CHECK" and named in first["detail"], first


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("threads", "two", 'threads should be a whole number, not "two"'),
        ("seeds", "x", 'seeds should be an object of step names and seeds, not "x"'),
        ("engine", 5, "engine should be a string, not 5"),
    ],
)
def test_a_manifest_with_a_value_of_the_wrong_type_is_refused_naming_it(
    twicerun, write_pipeline, run_dir, field, value, named
):
    """An edited invocation.json crashed reproduce with an internal error (exit 3 for the
    wrong reason) and let diff print `engine (5 against DuckDB)`."""
    path = write_pipeline(STEADY)
    a = record(twicerun, path, run_dir)
    b = record(twicerun, path, run_dir)
    manifest = json.loads((b / MANIFEST_NAME).read_text())
    manifest[field] = value
    (b / MANIFEST_NAME).write_text(json.dumps(manifest))
    for outcome in (twicerun("reproduce", b), twicerun("diff", a, b)):
        assert outcome.code == 3, outcome.err
        assert outcome.err.startswith(f"twicerun: refused: {b / MANIFEST_NAME}: {named};"), (
            outcome.err
        )
        assert "internal error" not in outcome.err


def test_reproduce_checks_a_step_that_is_a_partial_or_a_callable_object(
    twicerun, write_pipeline, run_dir
):
    source = """
import functools


def numbers(ctx, n=10):
    ctx.write("numbers", f"SELECT range AS n FROM range({n})")


class Doubled:
    def __call__(self, ctx):
        ctx.read("numbers")
        ctx.write("doubled", "SELECT n * 2 AS n FROM numbers")


STEPS = [functools.partial(numbers, n=20), Doubled()]
"""
    run = record(twicerun, write_pipeline(source), run_dir)
    outcome = twicerun("reproduce", run, "--json", "-")
    assert [s["verdict"] for s in outcome.json()["steps"]] == ["REPRODUCED", "REPRODUCED"]
    assert outcome.code == 0


def test_a_step_whose_code_twicerun_cannot_read_is_not_blamed_on_an_older_twicerun():
    from twicerun.storage.receipts import RECEIPT_VERSION, Receipt
    from twicerun.verdicts.reproduce import cannot_check

    receipt = Receipt("loop", 1, 0, "s", 2, 0.1, "ok", version=RECEIPT_VERSION, duckdb="2.0.1")
    assert cannot_check(receipt, "", "2.0.1") == (
        "twicerun cannot read this step's code, so it cannot tell whether it changed"
    )
    assert "older twicerun" in cannot_check(receipt, "abc", "2.0.1")


def test_reproduce_names_its_two_sides_as_the_record_and_the_re_execution(
    twicerun, write_pipeline, run_dir
):
    # reproduce said "2 rows only in the first, 2 rows only in the second", the words of a
    # diff between two runs, leaving a reader to guess which side was the record.
    path = write_pipeline(
        "def tag(ctx):\n"
        '    ctx.write("t", "SELECT range AS id, uuid()::VARCHAR AS u FROM range(2)")\n',
        "tag.py",
    )
    run = record(twicerun, path, run_dir, "--no-amplify")
    (step,) = twicerun("reproduce", run, "--json", "-").json()["steps"]
    assert step["detail"] == (
        "t: ROW_MISSING, ROW_EXTRA; 2 rows only as recorded, 2 rows only as re-executed "
        "(of 2 and 2); they pair once u is left out"
    )


# audit --------------------------------------------------------------------------------

AUDITED = """
from twicerun import step


def fixed(ctx):
    ctx.write("fixed", "SELECT range AS n FROM range(100)")


def shuffled(ctx):
    # The same rows, in an order that changes on every call.
    ctx.write("shuffled", "SELECT range AS n FROM range(100) ORDER BY random()")


def moving(ctx):
    ctx.write("moving", "SELECT range AS n, random() AS r FROM range(100)")


@step(stochastic=True, seed="seed")
def held(ctx, seed: int = 7):
    ctx.sql(f"SELECT setseed({seed} / 100.0)")
    ctx.write("sample", "SELECT range AS n, random() AS r FROM range(100)")


@step(stochastic=True, seed="seed")
def ignores_its_seed(ctx, seed: int = 7):
    ctx.write("unseeded", "SELECT range AS n, random() AS r FROM range(100)")
"""


def test_audit_every_verdict_with_wording_that_follows_the_facts(twicerun, write_pipeline):
    path = write_pipeline(AUDITED)
    outcome = twicerun("audit", path, "--threads", "1", "--json", "-")
    assert outcome.code == 1, outcome.err
    document = outcome.json()
    assert document["schema"] == "twicerun.audit/1"
    verdicts = {s["name"]: s["verdict"] for s in document["steps"]}
    assert verdicts == {
        "fixed": "deterministic",
        "shuffled": "reproducible",
        "moving": "not reproducible",
        "held": "reproducible",
        "ignores_its_seed": "not reproducible",
    }
    assert document["verdict"] == "not reproducible"
    assert all(len(s["seconds"]) == 2 for s in document["steps"])
    # The instrument the verdicts hold for.
    assert (document["threads"], document["duckdb"]) == (1, duckdb.__version__)

    text = twicerun("audit", path, "--threads", "1").out
    assert re.fullmatch(
        rf"{re.escape(str(path))}: not reproducible \(5 steps audited, two runs each, the "
        rf"second in another Python process \(another string hash seed\), at "
        rf"threads=1 on DuckDB "
        rf"{re.escape(duckdb.__version__)}, in \d+\.\ds\)",
        text.splitlines()[-1],
    )
    held = text[text.index(" held") :]
    assert "identical bytes both times" in held.split("\n")[1]
    assert "because `seed` was held at 7, not because the step cannot change" in held
    ignoring = text[text.index("ignores_its_seed") :]
    assert (
        "`seed` was held at 7 and the result moved anyway: the seed does not control this step"
        in ignoring
    )

    # At two threads the same fact proves less: a seeded draw can land on rows in another
    # order (setseed + random() does), so the audit does not say the seed is ignored.
    two = twicerun("audit", path, "--threads", "2", "--step", "ignores_its_seed").out
    assert (
        "`seed` was held at 7 and the result moved anyway at threads=2: the seed does not hold "
        "it still there (`--threads 1` shows whether the threads are why)"
    ) in two
    assert "does not control" not in two
    # No command says "deterministic" of a seeded step, and the audit speaks no ladder word.
    for line in text.splitlines():
        if line.startswith("deterministic"):
            assert line.split()[2] in ("fixed",), line
    assert not LADDER_WORDS.search(text)


DRAWS_UNSEEDED = """
import random


def draws_but_writes_alike(ctx):
    # Python's random module drawn from and not seeded, in a way that leaves the rows alone.
    random.random()
    ctx.write("rows", "SELECT range AS n FROM range(10)")


def draws_nothing(ctx):
    ctx.write("fixed", "SELECT range AS n FROM range(10)")
"""


def test_an_audit_of_a_step_with_many_artifacts_shows_the_worst_and_counts_the_rest(
    twicerun, write_pipeline
):
    """A step writing 300 artifacts got two lines or more for each, 600 lines. Five are
    shown, the ones that moved first (so one moving artifact among many is not counted
    away), and one line says how the rest came out."""
    path = write_pipeline(
        "def fan_out(ctx):\n"
        "    for k in range(7):\n"
        '        ctx.write(f"part_{k}", f"SELECT {k} AS v")\n'
        '    ctx.write("moves", "SELECT (random() * 1e15)::BIGINT AS v")\n'
    )
    lines = twicerun("audit", path, "--threads", "1").out.splitlines()
    rows = [re.match(r"    (\w+) +(identical bytes|the rows differ)", line) for line in lines]
    assert [m.group(1) for m in rows if m] == ["moves", "part_0", "part_1", "part_2", "part_3"]
    assert "    and 3 more artifacts: 3 with identical bytes both times" in lines
    (step,) = twicerun("audit", path, "--threads", "1", "--json", "-").json()["steps"]
    assert len(step["artifacts"]) == 8


def test_an_audit_never_calls_a_step_that_drew_unseeded_deterministic(twicerun, write_pipeline):
    """Equal bytes from a step that drew from Python's random module without seeding it
    were called deterministic, as if nothing could move them: like a held seed, the draw is
    why the bytes matched, or happened to."""
    path = write_pipeline(DRAWS_UNSEEDED)
    document = twicerun("audit", path, "--threads", "1", "--json", "-").json()
    steps = {s["name"]: s for s in document["steps"]}
    assert steps["draws_but_writes_alike"]["verdict"] == "reproducible"
    assert steps["draws_but_writes_alike"]["drew_unseeded"] == "Python's random module"
    assert (steps["draws_nothing"]["verdict"], steps["draws_nothing"]["drew_unseeded"]) == (
        "deterministic", None,
    )  # fmt: skip
    text = twicerun("audit", path, "--threads", "1").out
    assert (
        "though it drew from Python's random module with no seed fixed in the step, so nothing "
        "held it still: the runs agreed, not because the step cannot change"
    ) in text


def test_an_audit_of_a_step_drawing_after_a_seed_set_at_import_is_not_reproducible(
    twicerun, write_pipeline
):
    """docs/verdicts.md says a random.seed(42) at the top of the file holds nothing still for
    the audit: its first run draws after the ordinary run in the same process, its second
    in a process that imported the file afresh."""
    path = write_pipeline(
        "import random\n\nrandom.seed(42)\n\n\n"
        'def draws(ctx):\n    ctx.write("drawn", f"SELECT {random.random()} AS v")\n'
    )
    step = twicerun("audit", path, "--threads", "1", "--json", "-").json()["steps"][0]
    assert (step["verdict"], step["drew_unseeded"]) == (
        "not reproducible", "Python's random module",
    )  # fmt: skip


def test_an_audit_names_a_module_value_an_earlier_step_changed_between_its_runs(
    twicerun, write_pipeline
):
    """A step that writes rows from a module dict an earlier step fills with random numbers
    is not reproducible, and the audit said only that its rows differ: the step itself
    computes the same from the same dict."""
    path = write_pipeline(
        FILLS_A_DICT + '\n\ndef plain(ctx):\n    ctx.write("p", "SELECT 1 AS one")\n'
    )
    steps = twicerun("audit", path, "--json", "-").json()["steps"]
    build, use, plain = steps
    assert (use["verdict"], use["moved_past_ctx"]) == ("not reproducible", ["SHARED of its file"])
    assert plain["moved_past_ctx"] == []
    # The step that fills it found it so too, but repeated itself: no line for it.
    assert build["verdict"] == "reproducible"
    text = twicerun("audit", path).out
    line = (
        "    it reads SHARED of its file, which its second run did not find as its first did: "
        "what another step changes there reaches it past ctx, so the difference may come from "
        "there (hand the rows over with ctx.write and ctx.read)\n"
    )
    assert text.count(line) == 1


def test_audit_holds_a_seed_where_told_as_run_does(twicerun, write_pipeline):
    path = write_pipeline(AUDITED)
    outcome = twicerun("audit", path, "--step", "held", "--seed", "held=11", "--threads", "1")
    assert outcome.code == 0, outcome.err
    assert "because `seed` was held at 11, not because the step cannot change" in outcome.out
    refused = twicerun("audit", path, "--seed", "fixed=3")
    assert refused.code == 2
    assert "--seed names fixed, which is no step" in refused.err


RAISES_LATER = """
from pathlib import Path

# The first import is twicerun's own process; the second audit run imports the file
# again in another process, which finds the mark.
_MARK = Path(__file__).with_suffix(".imported")
_FIRST_IMPORT = not _MARK.exists()
_MARK.touch()


def fixed(ctx):
    ctx.write("fixed", "SELECT range AS n FROM range(10)")


def flaky(ctx):
    # Fine in the ordinary run and the first audit run, raises in the second.
    if not _FIRST_IMPORT:
        raise RuntimeError("the source went away")
    ctx.write("flaky", "SELECT 1 AS n")


def broken(ctx):
    ctx.read("fixed")
    raise ValueError("bad")
"""


def test_an_audit_a_step_stops_still_reports_what_it_audited_before(twicerun, write_pipeline):
    # A step that raised used to lose every verdict: exit 3 and the error, nothing else.
    path = write_pipeline(RAISES_LATER)
    outcome = twicerun("audit", path, "--step", "fixed", "--step", "broken", "--json", "-")
    assert outcome.code == 3
    document = outcome.json()
    assert [(s["name"], s["verdict"]) for s in document["steps"]] == [("fixed", "deterministic")]
    assert document["stopped_at"] == "step 2 broken"
    assert outcome.err.startswith("twicerun: step 2 broken raised in run 1")

    path.with_suffix(".imported").unlink()
    text = twicerun("audit", path, "--step", "fixed", "--step", "broken").out.splitlines()
    assert text[-1].startswith(
        f"{path}: deterministic for the steps above, audited before step 2 broken stopped the "
        "audit (1 step audited, two runs each"
    )


def test_an_audit_stopped_by_its_first_step_gives_no_verdict(twicerun, write_pipeline):
    # It called the pipeline deterministic "for the steps above", with no step above.
    path = write_pipeline(RAISES_LATER)
    outcome = twicerun("audit", path, "--step", "broken", "--json", "-")
    assert outcome.code == 3
    document = outcome.json()
    assert (document["steps"], document["verdict"]) == ([], None)
    assert document["stopped_at"] == "step 2 broken"
    path.with_suffix(".imported").unlink()
    text = twicerun("audit", path, "--step", "broken").out.splitlines()
    assert text[-1].startswith(
        f"{path}: no verdict, since step 2 broken stopped the audit before any step was "
        "audited (0 steps audited, two runs each"
    )


def test_a_step_that_raises_in_one_audit_run_and_writes_in_the_other_is_not_reproducible(
    twicerun, write_pipeline
):
    """It stopped the audit as a crash (exit 3) with no verdict for it or any step after
    it, though raising once and writing once on the same inputs is the step not repeating
    itself, which is what an audit is for (a step that iterates over a set of strings
    and raises under some string hash seeds does this)."""
    path = write_pipeline(RAISES_LATER)
    # Raises in the second run, in the other process.
    outcome = twicerun("audit", path, "--step", "flaky", "--step", "fixed", "--json", "-")
    assert outcome.code == 1, outcome.err
    document = outcome.json()
    assert document["stopped_at"] is None
    fixed, flaky = document["steps"]
    assert (flaky["name"], flaky["verdict"]) == ("flaky", "not reproducible")
    assert flaky["raised"][0] == ""
    assert flaky["raised"][1].startswith("RuntimeError: the source went away (at ")
    assert (fixed["name"], fixed["verdict"]) == ("fixed", "deterministic")
    path.with_suffix(".imported").unlink()
    text = twicerun("audit", path, "--step", "flaky").out
    assert (
        "    the second run (in another Python process) raised, where the first wrote its "
        "artifacts: RuntimeError: the source went away (at "
    ) in text

    # Raises in the first audit run here (its second execution in this process), and
    # writes in the other process, where it is the first: not reproducible the other way,
    # and the step after it is still audited.
    counted = write_pipeline(COUNTED_RAISE, "counted.py")
    outcome = twicerun("audit", counted, "--json", "-")
    assert outcome.code == 1, outcome.err
    step, after = outcome.json()["steps"]
    assert step["verdict"] == "not reproducible"
    assert step["raised"][0].startswith("RuntimeError: second call (at ")
    assert step["raised"][1] == ""
    assert (after["name"], after["verdict"], after["raised"]) == (
        "after",
        "deterministic",
        ["", ""],
    )

    # Raising in both audit runs is no answer to compare: the audit stops there (exit 3).
    both = write_pipeline(COUNTED_RAISE.replace("== 1", ">= 1 or not _FIRST"), "both.py")
    outcome = twicerun("audit", both, "--json", "-")
    assert outcome.code == 3
    assert outcome.json()["steps"] == [] and outcome.json()["stopped_at"] == "step 0 once"
    assert outcome.err.startswith("twicerun: step 0 once raised in run 1 (at ")


COUNTED_RAISE = """
import itertools
from pathlib import Path

_MARK = Path(__file__).with_suffix(".imported")
_FIRST = not _MARK.exists()
_MARK.touch()
_calls = itertools.count()


def once(ctx):
    if next(_calls) == 1:
        raise RuntimeError("second call")
    ctx.write("once", "SELECT 1 AS n")


def after(ctx):
    ctx.write("after", "SELECT 2 AS n")
"""


def test_an_audit_says_a_step_reading_its_own_state_was_not_rerun_on_top_of_it(
    twicerun, write_pipeline
):
    # An append that repeats rows on a rerun is "deterministic" to the audit (both of its
    # runs start from the initial rows and write the same thing) while `run` calls it
    # DIVERGENT; the audit used to say so with nothing beside it.
    path = write_pipeline(
        """
        def entries(ctx):
            ctx.write("new", "SELECT range AS id FROM range(3)")


        def append_log(ctx):
            ctx.read("new")
            ctx.state("log", "SELECT * FROM new WHERE false")
            ctx.write("log", "SELECT * FROM log UNION ALL SELECT * FROM new")
        """
    )
    outcome = twicerun("audit", path, "--json", "-")
    assert outcome.code == 0
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    assert (steps["append_log"]["verdict"], steps["append_log"]["state"]) == (
        "deterministic",
        ["log"],
    )
    assert steps["entries"]["state"] == []
    text = twicerun("audit", path).out
    assert text.count("ctx.state") == 1
    assert (
        "    it reads its own earlier output through ctx.state (log), and both audit runs "
        "started it from the initial rows; what a rerun does on top of an earlier output (an "
        "append that repeats rows) is `twicerun run`'s to show\n"
    ) in text
    assert not LADDER_WORDS.search(text)


def test_an_audits_columns_line_up_across_steps():
    from twicerun.verdicts.audit import ArtifactAudit, AuditReport, Repeatability, StepAudit

    def audited(index, name, artifact, same):
        digest = (f"{index}" * 12, f"{index}" * 12 if same else "f" * 12)
        verdict = Repeatability.DETERMINISTIC if same else Repeatability.NOT_REPRODUCIBLE
        return StepAudit(
            index, name, None, None, (0.01, 0.02),
            [ArtifactAudit(artifact, verdict, digest, digest)],
        )  # fmt: skip

    report = AuditReport("p.py", [audited(9, "a", "x", True), audited(10, "b", "long", False)], 1.0)
    assert report.lines()[:4] == [
        "deterministic      9 a  (0.01s and 0.02s)",
        "    x     identical bytes both times  999999999999",
        "          canonical form              999999999999",
        "not reproducible  10 b  (0.01s and 0.02s)",
    ]
    assert report.lines()[4] == "    long  the rows differ             101010101010 / ffffffffffff"


def test_a_seeded_step_that_moved_on_spark_is_told_about_partitions_not_threads():
    from twicerun.verdicts.audit import ArtifactAudit, AuditReport, Repeatability, StepAudit

    moved = StepAudit(
        3, "sample", "seed", 7, (0.5, 0.5),
        [ArtifactAudit("s", Repeatability.NOT_REPRODUCIBLE, ("a" * 12, "b" * 12), ("c" * 12, "d" * 12))],
    )  # fmt: skip
    spark = "Spark 4.0.0 on local[2] at partitions=2, compared by DuckDB 2.0.1"
    lines = AuditReport("p.py", [moved], 1.0, threads=2, duckdb="2.0.1", engine=spark).lines()
    assert lines[2] == (
        "       `seed` was held at 7 and the result moved anyway at partitions=2: the seed does "
        "not hold it still there (`--threads 1` runs it as one task and shows whether the "
        "partitions are why)"
    )
    on_duckdb = AuditReport("p.py", [moved], 1.0, threads=2, duckdb="2.0.1").lines()
    assert "at threads=2: the seed does not hold it still there" in on_duckdb[2]


def test_audit_of_a_pipeline_that_repeats_is_exit_0_and_deletes_its_scratch(
    twicerun, write_pipeline, tmp_path, monkeypatch
):
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    path = write_pipeline(STEADY)
    outcome = twicerun("audit", path, "--step", "second")
    assert outcome.code == 0, outcome.err
    assert outcome.out.splitlines()[0].startswith("deterministic     1 second")
    assert list(scratch.iterdir()) == []
    assert twicerun("audit", path, "--step", "third").code == 2


def test_audit_opens_a_connection_for_each_execution_and_none_besides(
    twicerun, write_pipeline, opened_connections
):
    """Audit knows its executions up front (one ordinary run to the chosen step, then one
    of it here and one in another process); a connection opened ahead that nothing uses
    costs a tiny step's time."""
    outcome = twicerun("audit", write_pipeline(STEADY), "--step", "second")
    assert outcome.code == 0, outcome.err
    assert len(opened_connections) == 2 + 1


def test_reproduce_opens_a_connection_for_each_execution_and_none_besides(
    twicerun, write_pipeline, run_dir, opened_connections
):
    """Reproduce told the helpers nothing of what was coming, so they kept three
    connections opened ahead to the end, and every reproduce ended with three that no
    step used (each costs a tiny step's time to open, and the process waited for them)."""
    path = write_pipeline(STEADY)
    recorded = record(twicerun, path, run_dir, "--no-amplify")
    opened_connections.clear()
    outcome = twicerun("reproduce", recorded)
    assert outcome.code == 0, outcome.err
    assert len(opened_connections) == 2
    opened_connections.clear()
    assert twicerun("reproduce", recorded, "--step", "second").code == 0
    assert len(opened_connections) == 1
    # A step it cannot check is not executed, and no connection is opened for it.
    write_pipeline(STEADY.replace("SELECT range AS n", "SELECT range + 1 AS n"))
    opened_connections.clear()
    outcome = twicerun("reproduce", recorded, "--json", "-")
    assert [s["verdict"] for s in outcome.json()["steps"]] == ["COULD NOT CHECK", "REPRODUCED"]
    assert len(opened_connections) == 1


def test_an_explanation_counts_one_row_and_one_value_in_the_singular():
    from twicerun.findings import ArtifactFindings
    from twicerun.verdicts.explain import describe

    one = ArtifactFindings(
        artifact="st", presence="both", classes=["ROW_MISSING", "ROW_EXTRA"], key=["at"],
        missing=1, extra=1, reference_rows=1, later_rows=1,
    )  # fmt: skip
    assert describe(one) == (
        "st: ROW_MISSING, ROW_EXTRA; 1 row only in the first, 1 row only in the second (of 1 and 1)"
    )
    many = ArtifactFindings(
        artifact="t", presence="both", classes=["ROW_MISSING"], key=["x"], missing=2,
        reference_rows=3, later_rows=1,
    )  # fmt: skip
    assert describe(many) == "t: ROW_MISSING; 2 rows only in the first (of 3 and 1)"


def test_an_explanation_counts_ulps_as_the_run_report_does():
    """It said "6 ulp" where `twicerun run` says "6 ulps" of the same move."""
    from twicerun.findings import ArtifactFindings, Drift
    from twicerun.verdicts.explain import describe

    def drifted(ulps: int) -> ArtifactFindings:
        drift = Drift("mean", "DOUBLE", "rows", 1, 3, max_ulps=ulps, max_relative=2e-16)
        return ArtifactFindings(
            artifact="m", presence="both", classes=["VALUE_DRIFT"], key=["g"],
            reference_rows=3, later_rows=3, paired=3, drift=[drift],
        )  # fmt: skip

    assert describe(drifted(6)).endswith("furthest in mean: 6 ulps, 2e-16 relative")
    assert describe(drifted(1)).endswith("furthest in mean: 1 ulp, 2e-16 relative")


def test_a_run_recorded_by_another_twicerun_is_named_beside_the_verdicts(
    twicerun, write_pipeline, run_dir
):
    """0.1.0 stored an integer total as DOUBLE and 0.2.0 stores it as DECIMAL(38,0): a
    step compared across the two differs because of twicerun, and the report must say so."""
    from twicerun import __version__

    path = write_pipeline(
        """
        def totals(ctx):
            ctx.write("totals", "SELECT range % 3 AS g, sum(range) AS total FROM range(9) GROUP BY g")
        """
    )
    older = record(twicerun, path, run_dir)
    newer = record(twicerun, path, run_dir)
    manifest = older / "invocation.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "twicerun": "0.1.0"}))

    compared = twicerun("diff", older, newer, "--json", "-").json()
    assert compared["steps"][0]["instrument"] == [f"twicerun (0.1.0 against {__version__})"]
    same = twicerun("diff", newer, f"{newer}#2", "--json", "-").json()
    assert same["steps"][0]["instrument"] == []

    replayed = twicerun("reproduce", older)
    assert replayed.out.splitlines()[1] == (
        f"  produced differently: twicerun (0.1.0 when recorded, {__version__} now)"
    )
    assert twicerun("reproduce", older, "--json", "-").json()["instrument"] == [
        f"twicerun (0.1.0 when recorded, {__version__} now)"
    ]
    assert "produced differently" not in twicerun("reproduce", newer).out


def test_an_explanation_quotes_a_column_name_that_is_not_one_word(tmp_path):
    """`furthest in tot al: 1 ulp` read as a column `tot` and a stray word; the run
    report quotes such a name SQL-style, and so does the ladder now."""
    import duckdb

    from twicerun.verdicts.explain import explain

    con = duckdb.connect()
    for side, total in (("a", "0.5::DOUBLE"), ("b", "0.5::DOUBLE + 1e-16")):
        con.execute(
            f"COPY (SELECT 1 AS k, {total} AS \"tot al\") TO '{tmp_path / side}.parquet' (FORMAT parquet)"
        )
    _, sentence = explain(con, "m", tmp_path / "a.parquet", tmp_path / "b.parquet")
    assert sentence.endswith('furthest in "tot al": 1 ulp, 2.2e-16 relative')


@pytest.mark.parametrize(
    ("raises_on", "why"),
    [
        # It said "clean" (exit 0): with no run after run 1 nothing had been compared.
        (
            0,
            [
                "the invocation has no run after run 1 to compare with it",
                "step 1 b: it raised in this run",
            ],
        ),
        # It blamed run 1's side ("a later run's copy cannot be named") when run 2 had raised.
        (
            1,
            [
                "the invocation did not complete: its manifest says failed",
                "step 1 b (run 2): it raised in this run",
            ],
        ),
    ],
    ids=["in-run-1", "in-run-2"],
)
def test_localize_of_an_invocation_that_stopped_says_what_it_could_not_check(
    write_pipeline, twicerun, run_dir, raises_on, why
):
    path = write_pipeline(
        "import itertools\n_calls = itertools.count()\n\n\n"
        'def a(ctx):\n    ctx.write("x", "SELECT 1 AS v")\n\n\n'
        f"def b(ctx):\n    if next(_calls) == {raises_on}:\n        raise RuntimeError('boom')\n"
        '    ctx.write("y", "SELECT 2 AS v")\n'
    )
    assert twicerun("run", path, "--runs", "3").code == 3
    (invocation,) = [p for p in run_dir.iterdir() if p.is_dir()]
    outcome = twicerun("localize", invocation)
    assert outcome.code == 4
    assert outcome.out.splitlines() == [
        f"could not check: {invocation}",
        *(f"  not checked: {line}" for line in why),
    ]


HASH_SEEDED = """
COLUMNS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
           "india", "juliet", "kilo", "lima"}


def wide(ctx):
    ctx.write("wide", "SELECT " + ", ".join(f"'{c}' AS {c}" for c in COLUMNS))


def wide_sorted(ctx):
    ctx.write("wide_sorted", "SELECT " + ", ".join(f"'{c}' AS {c}" for c in sorted(COLUMNS)))


def buckets(ctx):
    rows = ", ".join(f"('{c}', {hash(c) % 7})" for c in sorted(COLUMNS))
    ctx.write("buckets", f"SELECT * FROM (VALUES {rows}) v(name, bucket)")
"""


def test_audit_runs_the_second_run_under_another_string_hash_seed(twicerun, write_pipeline):
    """A SELECT list built from a set of strings, and buckets from hash(): both repeat
    themselves in one process, so the audit called them deterministic, while tomorrow's
    process writes other columns and other buckets. Twelve names come back in the same
    order under two random hash seeds far less often than once in a million."""
    outcome = twicerun("audit", write_pipeline(HASH_SEEDED), "--json", "-")
    assert outcome.code == 1, outcome.err
    document = outcome.json()
    verdicts = {s["name"]: s["verdict"] for s in document["steps"]}
    assert verdicts == {
        "wide": "not reproducible",
        "wide_sorted": "deterministic",
        "buckets": "not reproducible",
    }
    assert document["fresh_process"] is True
    # How the rows differ, by the oracle: "the rows differ" alone named no kind, where
    # columns in another order and a bucket moved are not the same finding.
    how = {s["name"]: s["artifacts"][0]["how"] for s in document["steps"]}
    assert how["wide"] == "wide: SCHEMA; the columns differ: columns reordered"
    assert how["wide_sorted"] is None
    assert how["buckets"].startswith("buckets: ROW_MISSING, ROW_EXTRA; ")
    assert how["buckets"].endswith("; they pair once bucket is left out")
    text = twicerun("audit", write_pipeline(HASH_SEEDED), "--step", "wide").out.splitlines()
    (at,) = [i for i, line in enumerate(text) if "the rows differ" in line]
    assert text[at + 1] == "    " + " " * len("wide") + "  " + how["wide"]


def test_a_diff_whose_copy_was_deleted_names_the_run_that_kept_one(
    twicerun, write_pipeline, run_dir
):
    """--keep-copies keeps the latest later run's differing copy; `diff DIR DIR#2` of a
    three-run invocation said only that the rows were not on disk and to use
    --keep-copies, which had been used: run 3 held a copy, and nothing said so."""
    path = write_pipeline(LADDER)
    outcome = twicerun("run", path, "--runs", "3", "--no-amplify", "--keep-copies")
    assert outcome.code == 1, outcome.err
    (invocation,) = _invocations(run_dir)
    diff = twicerun("diff", str(invocation), f"{invocation}#2")
    assert diff.code == 1, diff.err
    (line,) = [x.strip() for x in diff.out.splitlines() if "not on disk" in x]
    assert line == (
        "its rows are not on disk on both sides, so the oracle cannot say how; run 3 of "
        f"{invocation} kept its copy of noise: `twicerun diff {invocation} {invocation}#3` "
        "says how that run's rows differ"
    )
    # Where no run kept one, the advice is the option.
    again = twicerun("run", path, "--runs", "3", "--no-amplify", "--keep", "0")
    assert again.code == 1
    newest = _invocations(run_dir)[-1]
    plain = twicerun("diff", str(newest), f"{newest}#2").out
    assert "`twicerun run --keep-copies` keeps the latest" in plain


def test_audit_in_a_directory_holding_a_file_named_like_the_standard_library(
    twicerun, write_pipeline, tmp_path, monkeypatch
):
    """The second process was started with `python -c`, which puts the working directory
    first on its path: in a project holding a `types.py` (or `random.py`, `copy.py`...), it
    imported that in place of the standard module and died before its first step, so
    `twicerun audit` failed where `twicerun run` of the same pipeline passed."""
    write_pipeline("Point = tuple\n", name="types.py")
    path = write_pipeline(STEADY)
    monkeypatch.chdir(tmp_path)
    outcome = twicerun("audit", path.name, "--step", "second")
    assert outcome.code == 0, outcome.err
    assert outcome.out.splitlines()[0].startswith("deterministic     1 second")


def test_reproduce_refuses_a_master_for_a_run_that_ran_on_duckdb(write_pipeline, twicerun, run_dir):
    path = write_pipeline(
        'def a(ctx):\n    ctx.write("a", "SELECT range AS id FROM range(10)")\n', "d.py"
    )
    assert twicerun("run", path, "--runs", "2").code == 0
    (invocation,) = [p.parent for p in run_dir.glob("*/invocation.json")]
    outcome = twicerun("reproduce", str(invocation), "--spark-master", "spark://example:7077")
    assert outcome.code == 3
    assert outcome.err.splitlines()[0] == (
        f"twicerun: refused: --spark-master spark://example:7077: {invocation} ran on DuckDB, "
        "which has "
        "no master, and reproduce re-executes a run on the engine it ran on"
    )


def test_diff_names_a_module_value_that_differed_as_the_step_ran(twicerun, write_pipeline, run_dir):
    """Two invocations of a step writing rows from a dict an earlier step fills with random
    numbers: "diverged with identical inputs", as if the step had stopped repeating itself.
    A receipt written before the value was recorded claims nothing either way."""
    path = write_pipeline(FILLS_A_DICT)
    a, b = record(twicerun, path, run_dir), record(twicerun, path, run_dir)
    use = twicerun("diff", a, b, "--json", "-").json()["steps"][1]
    assert use["verdict"] == "FIRST DIFFERENCE"
    (changed,) = use["instrument"]
    assert changed.startswith("values of the pipeline file as it ran (SHARED ")
    edit_receipt(b, 1, 1, values_read=None)
    assert twicerun("diff", a, b, "--json", "-").json()["steps"][1]["instrument"] == []


def test_an_audit_names_the_query_that_draws_at_random_and_calls_no_such_step_deterministic(
    write_pipeline, twicerun
):
    """A step ordering by random() was not reproducible with nothing said of why, and one
    whose draw happened not to show (a filter every row passes) was called deterministic,
    where a step drawing from Python's random module is only reproducible: nothing held
    the draw still."""
    path = write_pipeline(
        'def src(ctx):\n    ctx.write("t", "SELECT i AS id FROM range(100) t(i)")\n\n\n'
        "def shuffled(ctx):\n    ctx.read('t')\n"
        '    ctx.write("top", "SELECT id FROM t ORDER BY random() LIMIT 5")\n\n\n'
        "def passes(ctx):\n    ctx.read('t')\n"
        '    ctx.write("all", "SELECT count(*) AS n FROM t WHERE random() < 2")\n'
    )
    text = twicerun("audit", path).out
    assert (
        "its SQL draws at random and nothing in the step seeds the draw: "
        "SELECT id FROM t ORDER BY random() LIMIT 5"
    ) in text
    assert (
        "though it drew from random in its SQL (SELECT count(*) AS n FROM t WHERE random() < 2) "
        "with no seed fixed in the step, so nothing held it still"
    ) in text
    steps = {s["name"]: s for s in twicerun("audit", path, "--json", "-").json()["steps"]}
    assert steps["shuffled"]["verdict"] == "not reproducible"
    assert steps["passes"]["verdict"] == "reproducible"
    assert steps["src"]["draws_in_sql"] is None


def test_an_audit_does_not_credit_a_held_seed_with_a_draw_it_does_not_reach(
    write_pipeline, twicerun
):
    """setseed() holds random(), not a SAMPLE: a seeded step whose sample happened to agree
    (all or nothing on a few hundred rows) was "reproducible ... because `seed` was held at
    7". The sample here is of every row, so the two runs agree every time."""
    path = write_pipeline(
        "from twicerun import step\n\n\n"
        'def src(ctx):\n    ctx.write("t", "SELECT i AS id FROM range(100) t(i)")\n\n\n'
        '@step(stochastic=True, seed="seed")\n'
        "def sampled(ctx, seed: int = 7):\n    ctx.read('t')\n"
        '    ctx.sql(f"SELECT setseed({seed} / 100)")\n'
        '    ctx.write("s", "SELECT id FROM t USING SAMPLE 100%")\n'
    )
    outcome = twicerun("audit", path, "--step", "sampled")
    assert outcome.out.splitlines()[3].strip() == (
        "though it drew from random in its SQL (SELECT id FROM t USING SAMPLE 100%) with no "
        "seed fixed in the step, so nothing held it still: the runs agreed, not because the "
        "step cannot change (`seed` was held at 7, and that draw does not take it)"
    )
    assert "because `seed` was held" not in outcome.out


def test_reproduce_says_when_the_column_that_moved_holds_when_each_run_was_written(
    write_pipeline, twicerun, run_dir
):
    """A timestamp from now() moved between the recorded run and the re-execution, and the
    ladder said only that the rows pair once it is left out."""
    path = write_pipeline(
        'def stamped(ctx):\n    ctx.write("stamped", "SELECT range AS id, now() AS loaded_at '
        'FROM range(5)")\n\n\n'
        # A timestamp from the data, picked at random: it moves too, and is no clock read.
        'def picked(ctx):\n    ctx.read("stamped")\n    ctx.write("picked", "SELECT id, TIMESTAMP '
        "'2024-01-01' + INTERVAL (floor(random() * 900)) DAY AS seen_at FROM stamped\")\n"
    )
    twicerun("run", path, "--runs", "2", "--no-amplify", "--run-dir", run_dir)
    (invocation,) = [p for p in Path(run_dir).iterdir() if p.is_dir()]
    out = twicerun("reproduce", str(invocation)).out
    assert (
        "they pair once loaded_at is left out; loaded_at holds the time each was written, a "
        "clock read"
    ) in out
    picked = out.split("1 picked")[1]
    assert "they pair once seen_at is left out" in picked
    assert "clock" not in picked


def test_diff_says_a_column_holds_a_clock_read_whichever_run_is_named_first(
    write_pipeline, twicerun, run_dir
):
    """`diff NEW OLD` left the clause out: the clock test wanted the second side's instants
    after the first's, as they are in a run's own comparisons, where run 1 ran first."""
    path = write_pipeline(
        'def stamped(ctx):\n    ctx.write("stamped", "SELECT range AS id, now() AS loaded_at '
        'FROM range(5)")\n'
    )
    for _ in range(2):
        twicerun("run", path, "--runs", "2", "--no-amplify", "--keep", "0", "--run-dir", run_dir)
    older, newer = sorted(p for p in Path(run_dir).iterdir() if p.is_dir())
    said = "loaded_at holds the time each was written, a clock read"
    for first, second in ((older, newer), (newer, older)):
        outcome = twicerun("diff", str(first), str(second))
        assert outcome.code == 1
        assert said in outcome.out, outcome.out


def test_diff_and_reproduce_quote_the_query_that_draws_at_random(write_pipeline, twicerun, run_dir):
    """A step ordering by random() "diverged with identical inputs" in diff and was
    DIVERGED in reproduce, with nothing said of why; both now quote the query."""
    path = write_pipeline(
        'def src(ctx):\n    ctx.write("t", "SELECT i AS id FROM range(100) t(i)")\n\n\n'
        "def shuffled(ctx):\n    ctx.read('t')\n"
        '    ctx.write("top", "SELECT id FROM t ORDER BY random() LIMIT 5")\n'
    )
    twicerun("run", path, "--runs", "2", "--no-amplify", "--keep-copies", "--run-dir", run_dir)
    (invocation,) = [p for p in Path(run_dir).iterdir() if p.is_dir()]
    said = (
        "       its SQL draws at random and nothing in the step seeds the draw: "
        "SELECT id FROM t ORDER BY random() LIMIT 5"
    )
    diff = twicerun("diff", str(invocation), f"{invocation}#2").out.splitlines()
    assert diff[diff.index("       diverged with identical inputs") + 1] == said
    reproduce = twicerun("reproduce", str(invocation)).out.splitlines()
    assert said in reproduce
    assert reproduce.index(said) > next(i for i, line in enumerate(reproduce) if "DIVERGED" in line)
    document = twicerun("reproduce", str(invocation), "--json", "-").json()
    shuffled = next(s for s in document["steps"] if s["name"] == "shuffled")
    assert shuffled["draws_in_sql"] == "SELECT id FROM t ORDER BY random() LIMIT 5"
