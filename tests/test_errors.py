"""Every error a user can cause: one sentence, the documented exit code, and nothing lost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from twicerun.storage.atomic import atomic_path


def only_invocation(run_dir: Path) -> Path:
    found = [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
    assert len(found) == 1, found
    return found[0]


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def temporaries(root: Path) -> list[str]:
    return [f for f in all_files(root) if ".tmp-" in f]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            """
            def a(ctx):
                ctx.write("x", "SELECT 1 AS v")

            def b(ctx):
                ctx.read("y")
            """,
            "ctx.read('y') in step 1 b: no earlier step wrote an artifact called y; "
            "the ones that exist are x",
        ),
        (
            """
            def a(ctx):
                ctx.read("later")

            def b(ctx):
                ctx.write("later", "SELECT 1 AS v")
            """,
            # The source says which step writes it: the steps are out of order.
            "ctx.read('later') in step 0 a: no earlier step wrote any artifact; step 1 b "
            "writes later, but runs after this one; put b before a (in STEPS, or in the file)",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", "SELECT 1 AS v")
                ctx.read("x")
            """,
            # It said "no earlier step wrote any artifact", true and no help.
            "ctx.read('x') in step 0 a: x was written by this step itself, and ctx.read reads "
            "what earlier steps wrote; to use those rows again here, make them a table "
            '(ctx.sql("CREATE TABLE ... AS ...")) and write from it, or use ctx.state for this '
            "step's copy from its previous run",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", "SELECT 1 AS v")
                ctx.write("x", "SELECT 2 AS v")
            """,
            "ctx.write('x') in step 0 a: x was already written by this step; "
            "write each artifact once",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", "SELECT 1 AS v")

            def b(ctx):
                ctx.write("x", "SELECT 2 AS v")
            """,
            "ctx.write('x') in step 1 b: x is already written by step 0 a; "
            "give this artifact another name",
        ),
        (
            """
            def a(ctx):
                ctx.write("daily-revenue", "SELECT 1 AS v")
            """,
            "ctx.write('daily-revenue') in step 0 a: an artifact name is an identifier (ASCII "
            "letters, digits and underscores, not starting with a digit), such as 'daily_revenue'",
        ),
        (
            """
            def a(ctx):
                ctx.read("2024 orders")
            """,
            "ctx.read('2024 orders') in step 0 a: an artifact name is an identifier (ASCII "
            "letters, digits and underscores, not starting with a digit), such as '_2024_orders'",
        ),
        (
            # "letters" read as satisfied to a user whose letters are not Latin ones.
            """
            def a(ctx):
                ctx.write("売上_2024", "SELECT 1 AS v")
            """,
            "ctx.write('売上_2024') in step 0 a: an artifact name is an identifier (ASCII "
            "letters, digits and underscores, not starting with a digit), such as '_2024'",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", [1, 2, 3])
            """,
            "ctx.write('x', data) in step 0 a: data must be a SQL query string, a DuckDB "
            "relation, a pyarrow Table or RecordBatchReader, or a DataFrame (pandas, polars), "
            "got list; pyarrow.Table.from_pylist(data) makes a Table of a list of rows (dicts)",
        ),
        (
            # Rows a step built in Python: the error now names the call that makes a Table.
            """
            def a(ctx):
                ctx.write("x", {"v": [1, 2]})
            """,
            "ctx.write('x', data) in step 0 a: data must be a SQL query string, a DuckDB "
            "relation, a pyarrow Table or RecordBatchReader, or a DataFrame (pandas, polars), "
            "got dict; pyarrow.table(data) makes a Table of a dict of columns",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", 42)
            """,
            "ctx.write('x', data) in step 0 a: data must be a SQL query string, a DuckDB "
            "relation, a pyarrow Table or RecordBatchReader, or a DataFrame (pandas, polars), "
            "got int",
        ),
        (
            # DuckDB's "must have at least one column" made this a step that crashed (exit 3).
            """
            import pyarrow as pa

            def a(ctx):
                ctx.write("x", pa.table({}))
            """,
            "ctx.write('x', data) in step 0 a: the pyarrow table has no columns, and an "
            "artifact needs at least one; write the columns it should hold (or a count, "
            "`SELECT count(*) AS n ...`)",
        ),
        (
            """
            def a(ctx):
                ctx.write("x", "SELECT 1 AS v")

            def b(ctx):
                ctx.state("x", "SELECT 1 AS v")
            """,
            "ctx.state('x') in step 1 b: x belongs to step 0 a; a step's state is its own "
            "artifact (read another step's with ctx.read)",
        ),
    ],
)
def test_a_contract_error_in_a_step_is_bad_input(
    write_pipeline, twicerun, run_dir, source, message
):
    path = write_pipeline(source)
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 2
    assert outcome.out == ""
    assert outcome.err == (
        f"twicerun: {message}\ntwicerun: the invocation directory is kept: {kept}\n"
    )
    assert json.loads((kept / "invocation.json").read_text())["outcome"] == "failed"


def test_a_step_that_raises_is_named_with_its_line_and_the_directory_is_kept(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline(
        """
        def fine(ctx):
            ctx.write("x", "SELECT 1 AS v")

        def broken(ctx):
            ctx.read("x")
            raise ValueError("the upstream file was empty")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 3
    assert outcome.err == (
        f"twicerun: step 1 broken raised in run 1 (at {path}:6): ValueError: the upstream file "
        f"was empty\ntwicerun: the invocation directory is kept: {kept}\n"
    )
    receipt = json.loads((kept / "loop" / "1" / "01-broken" / "receipt.json").read_text())
    assert receipt["outcome"] == "raised"
    assert receipt["error"].endswith("ValueError: the upstream file was empty")
    assert (kept / "loop" / "1" / "00-fine" / "x.parquet").exists()


def test_a_typo_in_states_initial_query_shows_the_steps_sql_not_twiceruns_view(
    write_pipeline, twicerun, run_dir
):
    """The error quoted `CREATE OR REPLACE VIEW "acc" AS SELEC 1 AS a`, a statement the
    step never wrote; ctx.write's errors already quoted the step's own query."""
    path = write_pipeline(
        """
        def accumulate(ctx):
            ctx.state("acc", "SELEC 1 AS a")
            ctx.write("acc", "SELECT * FROM acc")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    # Exactly what DuckDB says of the step's SQL on its own (DuckDB 1.x marks the place
    # with one caret, 2.x underlines the word).
    with pytest.raises(duckdb.ParserException) as own:
        duckdb.connect().extract_statements("SELEC 1 AS a")
    assert "LINE 1: SELEC 1 AS a" in str(own.value)
    assert outcome.err == (
        f"twicerun: step 0 accumulate raised in run 1 (at {path}:2): ParserException: "
        f"{own.value}\n"
        f"twicerun: the invocation directory is kept: {only_invocation(run_dir)}\n"
    )


def test_a_step_that_raises_only_in_a_later_run_is_called_a_failure_that_changes(
    write_pipeline, twicerun, run_dir
):
    """Run 1 went through and run 2 raised: the crash is itself an answer that changes from
    run to run. The report named the step and the error and nothing else, as if the step
    failed every time."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def flaky(ctx):
            if next(_calls) == 1:
                raise TimeoutError("the service did not answer")
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    outcome = twicerun("run", path, "--runs", "3")
    kept = only_invocation(run_dir)
    assert outcome.code == 3
    assert outcome.err == (
        f"twicerun: step 0 flaky raised in run 2 (at {path}:8): TimeoutError: the service did "
        "not answer\ntwicerun: it ran to the end in run 1 and raised in run 2, so whether this "
        "step fails changes from run to run; look for what it depends on that a rerun changes "
        f"(a service, a clock, a file, a race)\ntwicerun: the invocation directory is kept: {kept}\n"
    )


CRASHES_WHEN_TOLD = """
import pathlib


def fine(ctx):
    ctx.write("x", "SELECT 1 AS v")


def broken(ctx):
    ctx.read("x")
    if pathlib.Path({toggle!r}).exists():
        raise ValueError("told to crash")
    ctx.write("y", "SELECT v FROM x")
"""


def test_a_run_that_crashes_writes_no_result_and_leaves_an_earlier_one_as_it_was(
    write_pipeline, twicerun, tmp_path
):
    # A script reading `--json` learns of the crash from the exit code and stderr: stdout
    # stays empty and a Result from an earlier run at that path keeps its bytes, rather
    # than being replaced by a document that would describe half a loop.
    toggle = tmp_path / "crash"
    path = write_pipeline(CRASHES_WHEN_TOLD.format(toggle=str(toggle)))
    earlier = tmp_path / "result.json"
    assert twicerun("run", path, "--runs", "2", "--json", earlier).code == 0
    before = earlier.read_bytes()
    assert [s["name"] for s in json.loads(before)["steps"]] == ["fine", "broken"]
    toggle.touch()
    for target in ("-", earlier):
        outcome = twicerun("run", path, "--runs", "2", "--json", target)
        assert outcome.code == 3, outcome.err
        assert outcome.out == ""
        assert "ValueError: told to crash" in outcome.err
    assert earlier.read_bytes() == before


@pytest.mark.parametrize(
    ("call", "line"),
    [
        ('rows = ctx.sql("SELECT v FROM Upstream").fetchall()', "SELECT v FROM Upstream"),
        ('ctx.write("y", "SELECT v FROM upstream")', "SELECT v FROM upstream"),
    ],
)
def test_sql_naming_an_artifact_never_read_says_to_read_it(
    write_pipeline, twicerun, run_dir, call, line
):
    path = write_pipeline(
        f"""
        def first(ctx):
            ctx.write("upstream", "SELECT 1 AS v")

        def second(ctx):
            {call}
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 3
    lines = outcome.err.splitlines()
    assert lines[0].startswith(
        f"twicerun: step 1 second raised in run 1 (at {path}:5): CatalogException"
    )
    # DuckDB's snippet shows the step's own SQL, not the table ctx.sql wraps it in, at
    # the line it is on in the step's string (it said LINE 2, counting ctx's wrapper).
    assert f"LINE 1: {line}" in lines
    assert "__twicerun" not in outcome.err
    assert lines[-2:] == [
        'twicerun: upstream is an artifact of step 0 first; call ctx.read("upstream") in this '
        "step before its SQL uses it",
        f"twicerun: the invocation directory is kept: {kept}",
    ]


LINES = {
    "a one-line write": ('ctx.write("u", "SELECT idd FROM t")', "LINE 1: SELECT idd FROM t"),
    "a one-line query": ('ctx.sql("SELECT idd FROM t")', "LINE 1: SELECT idd FROM t"),
    # Each statement of several is run alone, and DuckDB counted lines within it.
    "a statement after another on its line": (
        'ctx.sql("SELECT 1;\\nSELECT 2; SELECT idd FROM t; SELECT 4")',
        "LINE 2:  SELECT idd FROM t",
    ),
    "a query after a blank line": (
        'ctx.sql("SELECT 1;\\n\\nSELECT idd FROM t")',
        "LINE 3: SELECT idd FROM t",
    ),
    # A query in triple quotes starts with a line break (written here as \n), which the
    # COPY around it used to lose.
    "a write in triple quotes": (
        'ctx.write("u", "\\n    SELECT id,\\n        idd + 1 AS y\\n    FROM t")',
        "LINE 3:         idd + 1 AS y",
    ),
    "a write after a blank line": (
        'ctx.write("u", "\\n\\n    SELECT idd FROM t")',
        "LINE 3: SELECT idd FROM t",
    ),
    # It quoted twicerun's CREATE OR REPLACE VIEW around it.
    "the initial query of ctx.state": (
        'ctx.state("led", "SELECT 0 AS n WHERE nope")',
        "LINE 1: SELECT 0 AS n WHERE nope",
    ),
}


@pytest.mark.parametrize("call, line", list(LINES.values()), ids=list(LINES))
def test_duckdbs_line_numbers_count_the_lines_of_the_steps_own_string(
    write_pipeline, twicerun, call, line
):
    path = write_pipeline(
        f"""
        def first(ctx):
            ctx.write("t", "SELECT 1 AS id")

        def second(ctx):
            ctx.read("t")
            {call}
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    lines = outcome.err.splitlines()
    # Up to a statement's semicolon, which DuckDB 2 keeps in its text and 1.x does not.
    (at,) = [i for i, said in enumerate(lines) if said.removesuffix(";") == line]
    # The caret still points into the step's line, under the name DuckDB could not bind.
    caret = lines[at + 1]
    assert set(caret.strip()) == {"^"}
    assert line[len(caret) - len(caret.lstrip()) :].startswith(("idd", "nope"))
    assert "__twicerun" not in outcome.err and "CREATE OR REPLACE VIEW" not in outcome.err


def test_a_line_number_that_changes_width_keeps_its_caret_under_the_same_character():
    from twicerun.storage.error_lines import renumbered

    message = "Binder Error: no\n\nLINE 10:   WHERE idd > 0\n                 ^^^"
    assert (
        renumbered(message, -1, 1)
        == "Binder Error: no\n\nLINE 9:   WHERE idd > 0\n                ^^^"
    )
    assert renumbered("LINE 9: x\n        ^", 1, 0) == "LINE 10: x\n         ^"
    # A line of ctx's own SQL above the step's is left as DuckDB numbered it.
    assert renumbered("LINE 1: COPY (\n        ^", -1, 1) == "LINE 1: COPY (\n        ^"


def test_an_unread_artifact_named_like_the_step_that_wrote_it_gets_the_same_hint(
    write_pipeline, twicerun, run_dir
):
    # Most pipelines name a step after what it writes. DuckDB, not finding the table, then
    # finds the step's function in the pipeline's module and refuses to scan it, which
    # says nothing about ctx.read.
    path = write_pipeline(
        """
        def orders(ctx):
            ctx.write("orders", "SELECT 1 AS v")

        def total(ctx):
            ctx.write("total", "SELECT sum(v) AS s FROM orders")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 3
    assert 'Python Object "orders" of type "function"' in outcome.err
    assert outcome.err.splitlines()[-2:] == [
        'twicerun: orders is an artifact of step 0 orders; call ctx.read("orders") in this '
        "step before its SQL uses it",
        f"twicerun: the invocation directory is kept: {kept}",
    ]


def test_a_step_querying_what_it_wrote_itself_is_told_how_to_name_those_rows(
    write_pipeline, twicerun, run_dir
):
    """A batch and its manifest written by one step: the manifest's SQL named the batch,
    which ctx.write makes no view of, and DuckDB's bare "does not exist" (with a guess at
    a system table) was all the step's author got. The hint's way out is run too."""
    path = write_pipeline(
        """
        def ingest(ctx):
            ctx.write("batch", "SELECT range AS id FROM range(5)")
            ctx.write("manifest", "SELECT count(*) AS n FROM batch")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 3
    assert outcome.err.splitlines()[-2:] == [
        "twicerun: batch is what this step wrote with ctx.write, which writes a file and "
        "makes no view of it here; to query those rows again in this step, name them first "
        '(rel = ctx.sql(...); ctx.write("batch", rel); rel.create_view("batch_rows")), or '
        "read batch in a later step",
        f"twicerun: the invocation directory is kept: {kept}",
    ]
    fixed = write_pipeline(
        """
        def ingest(ctx):
            rel = ctx.sql("SELECT range AS id FROM range(5)")
            ctx.write("batch", rel)
            rel.create_view("batch_rows")
            ctx.write("manifest", "SELECT count(*) AS n FROM batch_rows")
        """,
        "fixed.py",
    )
    assert twicerun("run", fixed, "--runs", "2").code == 0


def test_no_hint_for_a_table_that_no_step_wrote(write_pipeline, twicerun, run_dir):
    path = write_pipeline(
        """
        def first(ctx):
            ctx.write("upstream", "SELECT 1 AS v")

        def second(ctx):
            ctx.read("upstream")
            ctx.write("y", "SELECT v FROM elsewhere")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert "ctx.read(" not in outcome.err
    assert "Table with name elsewhere does not exist" in outcome.err


SHARES_CTX_ACROSS_THREADS = """
from concurrent.futures import ThreadPoolExecutor


def events(ctx):
    ctx.write("events", "SELECT i AS id, i % 8 AS part, i % 1000 AS v FROM range(40000) t(i)")


def totals(ctx):
    events = ctx.read("events")

    def part(p):
        for _ in range(10):
            (total,) = ctx.sql(f"SELECT sum(v) FROM events WHERE part = {p}").fetchone()
            (counted,) = events.filter(f"part = {p}").aggregate("count(*)").fetchall()
            table = ctx.sql(f"SELECT id FROM events WHERE part = {p}").to_arrow_table()
            assert events.filter(f"part = {p}").columns == ["id", "part", "v"]
        return p, int(total), counted[0], table.num_rows

    with ThreadPoolExecutor(4) as pool:
        done = sorted(pool.map(part, range(8)))
    ctx.write("parts", f"SELECT * FROM (VALUES {', '.join(map(str, done))}) t(p, total, n, r)")
"""


# A DuckDB 1.x relation cannot be given a lock (its class takes no Python subclass for
# an instance), so there its reads from two threads can still close each other's results.
ON_DUCKDB_1 = pytest.mark.skipif(
    duckdb.__version__.startswith("1."), reason="DuckDB 1.x relations are DuckDB's own"
)


@ON_DUCKDB_1
def test_threads_sharing_ctx_take_turns_on_its_connection(write_pipeline, twicerun, run_dir):
    """DuckDB 2.0 refuses a call on a connection another thread's call is using, where
    DuckDB 1 waited. ctx's own calls took turns from 0.7.14, but the relations they hand
    out did not: a thread pool reading `ctx.sql(...).fetchone()`, filtering an artifact
    or asking its columns crashed in run 1, in some runs and not others. Now they wait
    their turn as ctx's calls do, and the step runs."""
    outcome = twicerun("run", write_pipeline(SHARES_CTX_ACROSS_THREADS), "--runs", "2")
    assert outcome.code == 0, outcome.err
    (parts,) = run_dir.glob("*/loop/1/01-totals/parts.parquet")
    total = sum(i % 1000 for i in range(40000) if i % 8 == 3)
    assert pq.read_table(parts).to_pylist()[3] == {"p": 3, "total": total, "n": 5000, "r": 5000}


@ON_DUCKDB_1  # which has no to_arrow_reader, and ends a stream a later query interrupts
def test_a_query_started_while_rows_are_still_being_read_is_told_to_read_them_first(
    write_pipeline, twicerun
):
    path = write_pipeline(
        """
        def streaming(ctx):
            reader = ctx.sql("SELECT * FROM range(100000) t(i)").to_arrow_reader(1000)
            reader.read_next_batch()
            ctx.write("out", ctx.sql("SELECT 1 AS one"))
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert "connection has an open result" in outcome.err
    assert (
        "\ntwicerun: every ctx call runs on the step's one DuckDB connection (the cursor() "
        "DuckDB suggests is not part of ctx); ctx's calls and the relations they return wait "
        "their turn on it, but a read that streams (an Arrow reader, iter_rows) holds it until "
        "it is read to the end: read it to the end, or fetch the rows whole (fetchall(), "
        "to_arrow_table()), before the next call\n"
    ) in outcome.err


def test_a_write_whose_query_fails_leaves_no_file_and_no_temporary(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline(
        """
        def half(ctx):
            ctx.write("x", "SELECT CASE WHEN range < 100000 THEN range ELSE error('boom') END AS v "
                           "FROM range(200000)")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    kept = only_invocation(run_dir)
    assert all_files(kept / "loop") == ["1/00-half/receipt.json"]


def test_ctrl_c_inside_a_step_keeps_the_directory_and_leaves_no_temporary(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline(
        """
        def first(ctx):
            ctx.write("x", "SELECT range AS v FROM range(1000)")

        def interrupted(ctx):
            raise KeyboardInterrupt
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    kept = only_invocation(run_dir)
    assert outcome.code == 130
    assert outcome.err.endswith(
        f"twicerun: interrupted; the invocation directory is kept: {kept}\n"
    )
    assert json.loads((kept / "invocation.json").read_text())["outcome"] == "interrupted"
    assert temporaries(kept) == []
    assert (kept / "loop" / "1" / "00-first" / "x.parquet").exists()


def test_an_interrupted_atomic_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    final = tmp_path / "artifact.parquet"
    with pytest.raises(KeyboardInterrupt), atomic_path(final) as temporary:
        temporary.write_bytes(b"PAR1 half of a file")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_an_unimportable_pipeline_is_bad_input_and_creates_no_directory(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline("import no_such_module_anywhere\n")
    outcome = twicerun("run", path)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: could not import {path}:1: ModuleNotFoundError: "
        f"No module named 'no_such_module_anywhere' (twicerun runs the pipeline in "
        f"{sys.executable}; install what the pipeline imports there: {sys.executable} -m pip "
        f"install no_such_module_anywhere)\n"
    )
    assert not run_dir.exists()


def test_a_step_importing_a_module_that_is_not_installed_is_told_where_to_install_it(
    write_pipeline, twicerun
):
    # A step's `import pandas` (or DuckDB's .df(), which needs numpy) in a Python that lacks it.
    path = write_pipeline("def a(ctx):\n    import no_such_package.sub\n")
    outcome = twicerun("run", path)
    assert outcome.code == 3
    assert outcome.err.splitlines()[1] == (
        f"twicerun: twicerun runs the pipeline in {sys.executable}; install what the pipeline "
        f"imports there: {sys.executable} -m pip install no_such_package"
    )


def test_the_install_line_still_works_from_a_directory_holding_a_file_named_as_a_standard_module(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    """From a project whose root holds a `types.py`, `python -m pip` imported that file
    instead of the standard module and failed, so the advice itself did not work."""
    (tmp_path / "types.py").write_text("REVIEWED = True\n")
    monkeypatch.chdir(tmp_path)
    path = write_pipeline("def a(ctx):\n    import no_such_package\n")
    outcome = twicerun("run", path)
    assert outcome.code == 3
    advice = f"{sys.executable} -P -m pip install no_such_package"
    assert outcome.err.splitlines()[1].endswith(f"imports there: {advice}")
    # The line as printed runs pip from here, where the one without -P cannot start.
    started = subprocess.run(
        [sys.executable, "-P", "-m", "pip", "--version"], cwd=tmp_path, capture_output=True
    )
    assert started.returncode == 0, started.stderr
    unsafe = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], cwd=tmp_path, capture_output=True
    )
    assert unsafe.returncode != 0


def test_a_missing_pipeline_file_is_bad_input(tmp_path, twicerun):
    outcome = twicerun("run", tmp_path / "nope.py")
    assert outcome.code == 2
    assert outcome.err == f"twicerun: pipeline file {tmp_path / 'nope.py'} does not exist\n"


def test_a_file_with_no_steps_is_bad_input(write_pipeline, twicerun):
    path = write_pipeline("VALUE = 3\n")
    outcome = twicerun("run", path)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {path} defines no steps: define top-level functions whose first parameter "
        f"is `ctx`, or a list STEPS of step functions\n"
    )


def test_a_malformed_seed_flag_is_a_usage_error(write_pipeline, twicerun):
    path = write_pipeline("def a(ctx):\n    pass\n")
    outcome = twicerun("run", path, "--seed", "sample")
    assert outcome.code == 2
    assert "--seed" in outcome.err
    assert "write STEP=INTEGER, as in --seed sample_customers=7" in outcome.err


def test_an_unknown_option_is_a_usage_error_with_exit_2(write_pipeline, twicerun):
    path = write_pipeline("def a(ctx):\n    pass\n")
    outcome = twicerun("run", path, "--rusn", "3")
    assert outcome.code == 2
    # Click's own sentence, which quotes the option from 8.4 on; and it suggests --runs.
    assert re.search(r"No such option:? '?--rusn'?", outcome.err)
    assert "--runs" in outcome.err


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["--runs", "3"],
            "Error: No such option '--runs' for `twicerun audit`, which runs every step "
            "exactly twice, on the inputs of one run; `twicerun baseline compare`, "
            "`twicerun baseline update`, `twicerun gate` and `twicerun run` take --runs.\n",
        ),
        (
            ["--run-dir=runs"],
            "Error: No such option '--run-dir' for `twicerun audit`, which keeps nothing: its "
            "runs go to scratch files removed however it ends; `twicerun baseline compare`, "
            "`twicerun baseline update`, `twicerun gate` and `twicerun run` take --run-dir.\n",
        ),
        (
            ["--key", "t=id"],
            "Error: No such option '--key' for `twicerun audit`; `twicerun run` takes --key.\n",
        ),
    ],
)
def test_an_option_carried_over_from_another_verb_names_the_verbs_that_take_it(
    write_pipeline, twicerun, args, said
):
    """`audit --runs 3`, after `run --runs 3`, got click's bare "No such option", which
    says neither that the option exists nor why audit has none. Nothing runs."""
    path = write_pipeline("def a(ctx):\n    raise SystemExit('ran')\n")
    outcome = twicerun("audit", path, *args)
    assert outcome.code == 2
    assert outcome.err.endswith(said)
    assert outcome.out == ""


@pytest.mark.parametrize(
    "args, said",
    [
        (["runn", "p.py"], "Error: No such command 'runn'; did you mean `twicerun run`?\n"),
        (
            ["baseline", "updat"],
            "Error: No such command 'updat'; did you mean `twicerun baseline update`?\n",
        ),
        (
            ["pipelines/my pipe.py"],
            "Error: No such command 'pipelines/my pipe.py'; to run a pipeline, "
            "`twicerun run 'pipelines/my pipe.py'`.\n",
        ),
        # Nothing close: click's own sentence, unchanged.
        (["bogus"], "Error: No such command 'bogus'.\n"),
    ],
)
def test_a_mistyped_or_missing_verb_is_named(twicerun, args, said):
    """`twicerun runn` and `twicerun pipelines/p.py` got click's bare "No such command",
    which names neither the verb meant nor that a pipeline is run with `run`."""
    outcome = twicerun(*args)
    assert outcome.code == 2
    assert outcome.err.endswith(said)
    assert outcome.out == ""


def test_an_option_of_a_group_s_verb_is_named_with_the_group(twicerun):
    outcome = twicerun("baseline", "update", "p.py", "--keep", "2")
    assert outcome.code == 2
    assert outcome.err.endswith(
        "Error: No such option '--keep' for `twicerun baseline update`; "
        "`twicerun run` takes --keep.\n"
    )


def test_an_attribute_ctx_lacks_is_named_with_what_ctx_has(write_pipeline, twicerun):
    """`ctx.con` (or any typo) used to crash with Python's bare "'StepContext' object has
    no attribute 'con'", which names neither what exists nor where SQL goes."""
    path = write_pipeline(
        """
        def a(ctx):
            ctx.con.execute("SELECT 1")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert outcome.err.splitlines()[0].endswith(
        "AttributeError: ctx has no attribute 'con'; a step's ctx has read, state, write, sql, "
        "source and threads, and the step's SQL goes through ctx.sql"
    )


def test_a_read_that_finds_nothing_names_the_functions_the_file_imported(write_pipeline, twicerun):
    """Steps are the functions a file defines; one imported from a helper module is not a
    step. The read that then finds nothing used to say only that, leaving the user to
    work out why the step that writes the artifact never ran."""
    write_pipeline(
        """
        def make(ctx):
            ctx.write("events", "SELECT 1 AS id")
        """,
        name="import_hint_helpers.py",
    )
    path = write_pipeline(
        """
        from import_hint_helpers import make


        def count(ctx):
            ctx.read("events")
            ctx.write("n", "SELECT count(*) AS n FROM events")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 2
    assert outcome.err.splitlines()[0] == (
        "twicerun: ctx.read('events') in step 0 count: no earlier step wrote any artifact; "
        "make is imported into pipeline.py, and only functions defined in the file are steps; "
        "to run it, list the steps in order in STEPS"
    )
    # With STEPS, the imported function is a step like any other.
    path.write_text(path.read_text() + "\n\nSTEPS = [make, count]\n")
    assert twicerun("run", path, "--runs", "2").code == 0


def test_a_full_disk_under_a_step_says_what_to_free_not_only_what_the_step_did(
    write_pipeline, twicerun
):
    """A step's write that found no space was reported as the step raising, and nothing
    more; the one thing to do is free space or move --run-dir."""
    path = write_pipeline(
        "import errno\n\n\n"
        "def a(ctx):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    lines = outcome.err.splitlines()
    assert lines[0].startswith("twicerun: step 0 a raised in run 1")
    assert lines[1].startswith(
        "twicerun: no space is left on a disk; free some, or point --run-dir"
    )
    assert lines[2].startswith("twicerun: the invocation directory is kept: ")


def test_a_full_disk_outside_any_step_is_one_sentence_not_a_traceback(
    write_pipeline, twicerun, monkeypatch, run_dir
):
    """Outside a step (a receipt, a manifest, the Result), a full disk printed a
    traceback and "internal error", which reads as a bug in twicerun."""
    import errno

    from twicerun.runner import loop

    target = run_dir / "result.json"

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    monkeypatch.setattr(loop, "save_result", full)
    outcome = twicerun("run", write_pipeline("def a(ctx):\n    ctx.write('t', 'SELECT 1 AS v')\n"))
    assert outcome.code == 3
    (kept,) = [p for p in run_dir.iterdir() if p.is_dir()]
    assert outcome.err == (
        f"twicerun: no space is left on a disk (writing {target}); free some, or point "
        f"--run-dir at a disk with room: an invocation keeps about two runs' worth of its "
        f"artifacts at once, plus the amplified inputs while an amplifier runs\n"
        f"twicerun: the invocation directory is kept: {kept}\n"
    )
    manifest = json.loads((kept / "invocation.json").read_text())
    assert manifest["outcome"] == "failed"


SPLIT = """
def a(ctx):
    ctx.write("t", "SELECT range AS x FROM range(10)")


def b(ctx):
    ctx.read("t")
    ctx.write("u", "SELECT x, x * 2 AS y FROM t")
"""


@pytest.mark.parametrize("extra", [[], ["--json", "-"]], ids=["report", "json"])
def test_a_reader_that_leaves_early_does_not_turn_a_clean_run_into_a_divergent_one(
    write_pipeline, run_dir, extra
):
    # `twicerun run p.py | head` with pipefail: click turned the broken pipe into exit 1,
    # which is what `run` says when a step diverged.
    import subprocess
    import sys

    command = [sys.executable, "-m", "twicerun", "run", str(write_pipeline(SPLIT))]
    command += ["--runs", "2", "--no-amplify", "--run-dir", str(run_dir), *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader leaves before a byte is written
    err = process.stderr.read().decode()
    assert process.wait() == 0, err
    assert "Error" not in err and "Traceback" not in err
    assert json.loads((only_invocation(run_dir) / "invocation.json").read_text())["outcome"] == (
        "completed"
    )


def test_windows_is_refused_before_a_step_runs_and_help_still_teaches(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    """Nothing that executes steps was ever run on Windows, and deciding whether an earlier
    invocation still lives sends a signal that Windows turns into a kill: each verb that
    executes steps refuses there in one sentence, with its own refusal code, before
    anything is created."""
    import types

    from twicerun.runner import engines

    path = write_pipeline(
        """
        def first(ctx):
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 0
    (recorded,) = [p for p in run_dir.iterdir() if p.is_dir()]
    before = sorted(p.name for p in run_dir.iterdir())
    monkeypatch.setattr(engines, "sys", types.SimpleNamespace(platform="win32"))
    sentence = (
        "twicerun executes pipelines on Linux and macOS, and this is Windows, whose "
        "processes and signals it cannot check safely; run it under WSL, or on a Linux "
        "runner in CI"
    )
    for args, said, code in [
        (("run", path, "--runs", "2"), "twicerun: ", 2),
        (("audit", path), "twicerun: ", 2),
        (("reproduce", recorded), "twicerun: refused: ", 3),
    ]:
        outcome = twicerun(*args)
        assert (outcome.code, outcome.err.splitlines()) == (code, [said + sentence]), args
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert twicerun("run", "--help").code == 0
    # Reading what was recorded elsewhere executes nothing.
    assert twicerun("judge", recorded).code == 0


UNPRINTABLE = """
class Unprintable(Exception):
    def __str__(self):
        return self.detail  # never set


def load(ctx):
    ctx.write("t", "SELECT 1 AS v")
    raise Unprintable()
"""


@pytest.mark.parametrize("amplify", [False, True])
def test_an_exception_whose_message_cannot_be_shown_is_still_a_step_that_crashed(
    write_pipeline, twicerun, run_dir, amplify
):
    # Its str() raised wherever twicerun read the message, and twicerun stopped with a
    # traceback of its own, exit 1.
    path = write_pipeline(UNPRINTABLE)
    outcome = twicerun("run", path, "--runs", "2", *(["--amplify"] if amplify else []))
    assert outcome.code == 3
    assert outcome.err.splitlines()[0] == (
        f"twicerun: step 0 load raised in run 1 (at {path}:8): Unprintable: "
        "(its message could not be shown: str() raised AttributeError)"
    )
    (receipt,) = run_dir.glob("*/loop/1/00-load/receipt.json")
    assert "Unprintable" in json.loads(receipt.read_text())["error"]
