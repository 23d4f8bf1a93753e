"""The ctx a step receives: every way to write, what sql() returns, and what it records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from twicerun.errors import ContractError
from twicerun.storage.context import ArtifactRef, StepContext


def make_ctx(tmp_path: Path, visible=None, state=None, threads=2) -> StepContext:
    return StepContext(
        connection=duckdb.connect(),
        threads=threads,
        step_index=1,
        step_name="step",
        out_dir=tmp_path / "out",
        visible=visible or {},
        state_source=state or (lambda name: None),
        owners={},
    )


def rows(path: Path) -> list[tuple]:
    return duckdb.sql(f"SELECT * FROM read_parquet('{path}') ORDER BY ALL").fetchall()


def test_write_takes_a_query_a_relation_or_an_arrow_table(tmp_path):
    ctx = make_ctx(tmp_path)
    ctx.write("from_sql", "SELECT 1 AS a")
    ctx.write("from_relation", ctx.sql("SELECT 2 AS a"))
    ctx.write("from_arrow", pa.table({"a": [3]}))
    out = tmp_path / "out"
    assert rows(out / "from_sql.parquet") == [(1,)]
    assert rows(out / "from_relation.parquet") == [(2,)]
    assert rows(out / "from_arrow.parquet") == [(3,)]
    assert list(ctx.output.written) == ["from_sql", "from_relation", "from_arrow"]


def test_calls_through_ctx_from_a_pool_of_threads_take_turns(tmp_path):
    # DuckDB 2 refuses a call on a connection busy with another, where DuckDB 1 waited:
    # a step writing its partitions from a thread pool raised ResourceInUseException in
    # some runs. ctx's own calls wait for each other, as they did on DuckDB 1. (A relation
    # ctx handed back runs on the same connection when fetched, which stays DuckDB's.)
    import threading
    from concurrent.futures import ThreadPoolExecutor

    ctx = make_ctx(tmp_path)
    ctx.write("base", "SELECT range AS v, range % 8 AS g FROM range(400000)")
    base = tmp_path / "out" / "base.parquet"
    together = threading.Barrier(4)

    def one(g: int) -> Any:
        if g < 4:
            together.wait()  # the first four start at once
        ctx.write(f"part_{g}", f"SELECT v FROM read_parquet('{base}') WHERE g = {g}")
        return ctx.sql(f"SELECT sum(v) AS s FROM read_parquet('{base}') WHERE g = {g}")

    with ThreadPoolExecutor(4) as pool:
        relations = list(pool.map(one, range(8)))
    sums = [relation.fetchall() for relation in relations]
    assert sums == [[(sum(range(g, 400000, 8)),)] for g in range(8)]
    for g in range(8):
        assert len(rows(tmp_path / "out" / f"part_{g}.parquet")) == 50_000
    assert sorted(ctx.output.written) == ["base", *(f"part_{g}" for g in range(8))]


def test_write_takes_the_arrow_stream_a_relation_gives(tmp_path):
    """DuckDB's `rel.arrow()` is a RecordBatchReader on the step's own connection;
    writing it failed with "connection has an open result"."""
    ctx = make_ctx(tmp_path)
    ctx.write("streamed", ctx.sql("SELECT range AS a FROM range(3)").arrow())
    relation = ctx.sql("SELECT 7 AS a")
    # DuckDB 2 renamed 1.x's fetch_record_batch() to to_arrow_reader(), deprecating the old.
    modern = hasattr(relation, "to_arrow_reader")
    ctx.write("batches", relation.to_arrow_reader() if modern else relation.fetch_record_batch())
    assert rows(tmp_path / "out" / "streamed.parquet") == [(0,), (1,), (2,)]
    assert rows(tmp_path / "out" / "batches.parquet") == [(7,)]


class ArrowStreamFrame:
    """A DataFrame of another library, as twicerun sees one: not pyarrow, exporting its
    rows through the Arrow C stream interface (pandas 2.2 and later, and polars, do)."""

    def __init__(self, table: pa.Table):
        self._table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self._table.__arrow_c_stream__(requested_schema)


def test_write_takes_a_dataframe_that_exports_an_arrow_stream(tmp_path):
    """A pandas or polars DataFrame was refused ("data must be ..., got DataFrame"), though
    DuckDB scans one in a query and a step that builds one writes it most naturally."""
    ctx = make_ctx(tmp_path)
    frame = ArrowStreamFrame(
        pa.table({"id": [3, 1, 2], "tags": [["a"], [], ["b", "c"]], "v": [0.5, None, 2.0]})
    )
    ctx.write("frame", frame)
    written = pq.read_table(tmp_path / "out" / "frame.parquet")
    # The rows, their order and their types as the frame held them.
    assert written.to_pydict() == {
        "id": [3, 1, 2],
        "tags": [["a"], [], ["b", "c"]],
        "v": [0.5, None, 2.0],
    }
    assert written.schema.field("id").type == pa.int64()
    assert list(ctx.output.written) == ["frame"]
    # Nothing of the scan is left in the step's catalog for a later query to meet.
    assert ctx.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall() == [(0,)]


def test_a_dataframe_without_columns_is_refused_in_one_sentence(tmp_path):
    ctx = make_ctx(tmp_path)
    with pytest.raises(ContractError) as refused:
        ctx.write("empty", ArrowStreamFrame(pa.table({})))
    assert "has no columns, and an artifact needs at least one" in str(refused.value)
    assert not (tmp_path / "out" / "empty.parquet").exists()


def test_sql_returns_a_relation_for_a_query_and_none_for_a_statement(tmp_path):
    ctx = make_ctx(tmp_path)
    assert ctx.sql("CREATE TABLE t AS SELECT 1 AS a") is None
    assert ctx.sql("INSERT INTO t VALUES (2)") is None
    assert ctx.sql("SET threads = 1") is None
    relation = ctx.sql("SELECT sum(a) AS s FROM t")
    assert relation.fetchall() == [(3,)]
    assert ctx.sql("SELECT ? + 1 AS v", params=[41]).fetchall() == [(42,)]


def test_read_exposes_a_view_and_counts_rows_once(tmp_path):
    source = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"n": [1, 2, 3]}), source)
    ref = ArtifactRef("orders", "loop/1", 0, "inputs", source, 3)
    ctx = make_ctx(tmp_path, visible={"orders": ref})
    assert ctx.read("orders").fetchall() == [(1,), (2,), (3,)]
    ctx.read("orders")
    assert ctx.sql("SELECT count(*) FROM orders").fetchall() == [(3,)]
    assert [(r.name, r.via, r.run, r.rows) for r in ctx.output.reads] == [
        ("orders", "read", "loop/1", 3)
    ]


def test_state_without_an_earlier_copy_is_the_initial_query(tmp_path):
    ctx = make_ctx(tmp_path)
    assert ctx.state("log", "SELECT 7 AS entry").fetchall() == [(7,)]
    assert [(r.via, r.run, r.rows) for r in ctx.output.reads] == [("state", None, 0)]


def test_state_with_an_earlier_copy_reads_it(tmp_path):
    earlier = tmp_path / "log.parquet"
    pq.write_table(pa.table({"entry": [1, 1]}), earlier)
    ref = ArtifactRef("log", "loop/1", 1, "step", earlier, 2)
    ctx = make_ctx(tmp_path, state=lambda name: ref if name == "log" else None)
    assert ctx.state("log", "SELECT 7 AS entry").fetchall() == [(1,), (1,)]


def test_threads_is_read_only(tmp_path):
    ctx = make_ctx(tmp_path, threads=3)
    assert ctx.threads == 3
    with pytest.raises(AttributeError):
        ctx.threads = 4  # type: ignore[misc]


def test_state_initial_must_be_a_query(tmp_path):
    ctx = make_ctx(tmp_path)
    with pytest.raises(ContractError) as info:
        ctx.state("log", None)  # type: ignore[arg-type]
    assert str(info.value) == (
        "ctx.state('log', initial): initial is a SQL query string giving the rows to start "
        "from, got NoneType"
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1 AS a; -- one row",
        "SELECT 1 AS a;;",
        "SELECT 1 AS a; /* done */",
        "SELECT 1 AS a\n;\n",
    ],
)
def test_a_query_may_end_in_semicolons_and_a_comment_after_them(tmp_path, query):
    """DuckDB runs all of these as one query; inside the COPY around it, the first
    semicolon closed the COPY early and the step raised a parser error."""
    ctx = make_ctx(tmp_path)
    ctx.write("one", query)
    assert rows(tmp_path / "out" / "one.parquet") == [(1,)]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("SELECT u FROM (SELECT 'über' AS u)", "über"),
        ("SELECT 'über' AS u;", "über"),
        ("SELECT '東京' AS city; -- 集計", "東京"),
        ("SELECT 'é;' AS x -- ü;", "é;"),
    ],
)
def test_a_query_with_characters_beyond_ascii_is_written_whole(tmp_path, query, expected):
    """DuckDB's tokenizer counts UTF-8 bytes; read as characters, a query ending in `)`
    after 'über' raised IndexError, and a semicolon after it was left inside the COPY."""
    ctx = make_ctx(tmp_path)
    ctx.write("t", query)
    assert rows(tmp_path / "out" / "t.parquet") == [(expected,)]


def test_a_semicolon_inside_a_string_or_a_comment_is_left_alone(tmp_path):
    ctx = make_ctx(tmp_path)
    ctx.write("semi", "SELECT ';' AS a -- ;")
    assert rows(tmp_path / "out" / "semi.parquet") == [(";",)]


def test_a_pivot_whose_columns_come_from_the_data_is_a_query(tmp_path):
    """DuckDB files `PIVOT ... ON d` without an IN list as a MULTI statement; ctx.write
    refused it ("got a MULTI statement") and ctx.sql ran it and returned None."""
    ctx = make_ctx(tmp_path)
    ctx.sql("CREATE TABLE e AS SELECT range % 2 AS u, range % 3 AS d, range AS v FROM range(6)")
    pivot = "PIVOT e ON d USING sum(v) GROUP BY u ORDER BY u"
    ctx.write("wide", pivot + ";")
    assert duckdb.sql(
        f"SELECT * FROM read_parquet('{tmp_path / 'out' / 'wide.parquet'}')"
    ).fetchall() == [(0, 0, 4, 2), (1, 3, 1, 5)]
    relation = ctx.sql(pivot)
    assert relation is not None and relation.columns == ["u", "0", "1", "2"]
    assert ctx.sql("CREATE TABLE w AS " + pivot) is None
    assert ctx.sql("SELECT count(*) FROM w").fetchall() == [(2,)]


def test_reads_behind_ctx_reads_back_are_recorded(tmp_path):
    ctx = make_ctx(tmp_path)
    pq.write_table(pa.table({"n": [1]}), tmp_path / "side.parquet")
    ctx.sql(f"SELECT * FROM read_parquet('{tmp_path / 'side.parquet'}')")
    assert len(ctx.output.sql_outside_ctx) == 1
    assert ctx.output.sql_outside_ctx[0].startswith("SELECT * FROM read_parquet(")


def test_a_file_written_behind_ctx_is_a_write_not_a_read(tmp_path):
    """COPY ... TO 'export.csv' was noted as rows read behind ctx.read's back, for the
    file name it writes to."""
    ctx = make_ctx(tmp_path)
    pq.write_table(pa.table({"n": [1]}), tmp_path / "side.parquet")
    ctx.sql("CREATE TABLE t AS SELECT 1 AS n")
    ctx.sql(f"COPY t TO '{tmp_path / 'export.csv'}' (HEADER, DELIMITER '|')")
    ctx.sql(f"EXPORT DATABASE '{tmp_path / 'dump'}'")
    assert ctx.output.sql_outside_ctx == []
    ctx.sql(f"COPY (SELECT * FROM '{tmp_path / 'side.parquet'}') TO '{tmp_path / 'b.csv'}'")
    ctx.sql(f"COPY t FROM '{tmp_path / 'export.csv'}' (HEADER, DELIMITER '|')")
    assert [q.split(" (")[0] for q in ctx.output.sql_writes_outside_ctx] == [
        f"COPY t TO '{tmp_path / 'export.csv'}'",
        f"EXPORT DATABASE '{tmp_path / 'dump'}'",
        "COPY",  # reads a file and writes one: it is both
    ]
    assert [q.split(" ")[:2] for q in ctx.output.sql_outside_ctx] == [
        ["COPY", "(SELECT"],
        ["COPY", "t"],
    ]


def test_a_file_written_behind_ctx_is_noted_as_not_compared(write_pipeline, twicerun, tmp_path):
    path = write_pipeline(
        f"""
        def export(ctx):
            ctx.sql("COPY (SELECT 1 AS n) TO '{tmp_path / "export.csv"}'")
            ctx.write("n", "SELECT 1 AS n")
        """
    )
    (step,) = twicerun("run", path, "--runs", "2", "--json", "-").json()["steps"]
    assert step["notes"] == [
        "writes a file in its SQL that ctx.write does not see, so it is not compared between "
        f"runs: COPY (SELECT 1 AS n) TO '{tmp_path / 'export.csv'}'"
    ]


CACHED_IN_A_FILE = """
import os


def firsts(ctx):
    if {fill_every_run} or not os.path.exists({cache!r}):
        ctx.sql("COPY (SELECT range % 5 AS k, any_value(range) AS v FROM range(100) GROUP BY 1) "
                "TO {cache!r}")
    ctx.write("firsts", "SELECT * FROM read_parquet({cache!r})")
"""

CACHE_NOTE = (
    "wrote that file in run 1 only, and every later run read rows past ctx: if it reads back "
    "what run 1 wrote (a cache filled on first use), the later runs did not compute its "
    "answer, so their agreeing, or any amplifier's, says nothing about its inputs"
)


@pytest.mark.parametrize("fill_every_run", [False, True])
def test_a_step_that_reads_back_what_its_first_run_wrote_is_told_its_quiet_runs_mean_nothing(
    write_pipeline, twicerun, tmp_path, fill_every_run
):
    """A cache filled on first use: run 1 computed and wrote a file, every later run read
    it back, and the step came out NO_DIVERGENCE_OBSERVED with every amplifier listed as
    varied, whatever its query does. A step that writes the file in every run computes
    its answer each time, and is not told so."""
    cache = str(tmp_path / "cache.parquet")
    path = write_pipeline(CACHED_IN_A_FILE.format(cache=cache, fill_every_run=fill_every_run))
    (step,) = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    assert step["notes"][0].startswith("reads rows in its SQL")
    assert step["notes"][1].startswith("writes a file in its SQL")
    assert (CACHE_NOTE in step["notes"]) is not fill_every_run


MEMO = """
_memo = {{}}


def firsts(ctx):
    if {fresh} or "firsts" not in _memo:
        _memo["firsts"] = ctx.sql("SELECT range AS v FROM range(10)").to_arrow_table()
    ctx.write("firsts", _memo["firsts"])
"""


@pytest.mark.parametrize("fresh", [False, True])
def test_an_artifact_handed_over_again_from_a_memo_is_named_as_not_computed(
    write_pipeline, twicerun, fresh
):
    """A step that kept its first run's pyarrow Table in a module-level dict and wrote it
    again in every later run came out NO_DIVERGENCE_OBSERVED with no word, every amplifier
    listed as varied. The same object handed over again is proof it was not computed; a
    table built afresh in each run, with the same rows, is not named."""
    path = write_pipeline(MEMO.format(fresh=fresh))
    (step,) = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    expected = [
        "wrote firsts in runs 2 and 3 from the very object an earlier execution of the step "
        "handed to ctx.write (a memo, a cache or a constant of the module keeps it): those "
        "runs did not compute those rows, so their agreeing, or any amplifier's, says nothing "
        "about its inputs"
    ]
    assert step["notes"] == ([] if fresh else expected)


def test_a_read_behind_ctx_in_a_write_query_is_noted_without_blaming_ctx_sql(
    write_pipeline, twicerun, tmp_path
):
    # The note said "through ctx.sql" for a file read inside the query given to ctx.write.
    pq.write_table(pa.table({"n": [1]}), tmp_path / "side.parquet")
    path = write_pipeline(
        f"def copy(ctx):\n    ctx.write('c', \"SELECT * FROM '{tmp_path / 'side.parquet'}'\")\n"
    )
    (step,) = twicerun("run", path, "--runs", "2", "--json", "-").json()["steps"]
    (note,) = step["notes"]
    assert note.startswith(
        "reads rows in its SQL that ctx.read and ctx.source do not see, so they are not "
        "counted or contained: SELECT * FROM '"
    )


def test_a_file_of_rows_a_step_opens_itself_is_noted_with_ctx_source_as_the_way(
    write_pipeline, twicerun, tmp_path
):
    """A CSV beside the pipeline read with Python's csv module (or pandas) was read behind
    twicerun's back with no word: its rows not counted, no amplifier varying them."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prices.csv").write_text("sku,price\na,1\nb,2\n")
    (tmp_path / "query.sql").write_text("SELECT 1 AS v")
    path = write_pipeline(
        """
        import csv
        from pathlib import Path

        HERE = Path(__file__).parent


        def load(ctx):
            import pyarrow as pa

            with open(HERE / "data" / "prices.csv", newline="") as f:
                rows = list(csv.DictReader(f))
            ctx.write("prices", pa.Table.from_pylist(rows))


        def templated(ctx):
            ctx.write("v", (HERE / "query.sql").read_text())
        """
    )
    steps = twicerun("run", path, "--runs", "2", "--json", "-").json()["steps"]
    assert steps[0]["notes"] == [
        "opens data/prices.csv itself, outside ctx.source, so its rows are not counted and no "
        "amplifier varies it; read it through ctx.source(name, files) instead"
    ]
    # SQL kept in a file is code, recorded for the verdicts, and no rows to read otherwise.
    assert steps[1]["notes"] == []


def test_a_pipeline_written_for_another_runner_runs_unchanged(write_pipeline, twicerun):
    # No twicerun import, a STEPS list, and only the ctx methods of the contract.
    path = write_pipeline(
        """
        import pyarrow as pa


        def load(ctx):
            ctx.write("raw", pa.table({"id": [1, 2, 3], "amount": [1.5, 2.5, 3.5]}))


        def transform(ctx):
            raw = ctx.read("raw")
            ctx.sql("CREATE TABLE doubled AS SELECT id, amount * 2 AS amount FROM raw")
            ctx.write("doubled", ctx.sql("SELECT * FROM doubled"))
            ctx.write("count", raw.aggregate("count(*) AS n"))
            assert ctx.threads >= 1
            # DuckDB 1.x's row-at-a-time reads, which DuckDB 2 took off relations.
            assert ctx.sql("SELECT count(*) FROM raw").fetchone()[0] == 3
            assert raw.filter("id > 1").fetchmany(5) == [(2, 2.5), (3, 3.5)]


        STEPS = [load, transform]
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert outcome.code == 0, outcome.err
    assert [s["wrote"] for s in outcome.json()["steps"]] == [["raw"], ["doubled", "count"]]


MODULE_TABLE = pa.table({"m": [10, 20]})


def test_sql_and_write_see_the_python_objects_the_calling_code_names(tmp_path):
    """DuckDB finds a pyarrow Table a query names in the frame that called it; through
    ctx.sql that frame was twicerun's, so `ctx.sql("SELECT ... FROM t")` raised "Table with
    name t does not exist" on a step's own local `t`, which `con.sql` would have found."""
    ctx = make_ctx(tmp_path)
    local = pa.table({"a": [1, 2, 3]})  # noqa: F841 -- named by the SQL below
    assert ctx.sql("SELECT sum(a) AS s FROM local").fetchall() == [(6,)]
    assert ctx.sql("SELECT sum(m) FROM MODULE_TABLE").fetchall() == [(30,)]  # module-level
    assert ctx.sql("SELECT ?::INTEGER + count(*) FROM local", params=[1]).fetchall() == [(4,)]
    assert ctx.sql("CREATE TABLE kept AS SELECT a FROM local") is None
    assert ctx.sql("EXPLAIN SELECT * FROM local").fetchall()
    ctx.write("written", "SELECT a * 2 AS b FROM local")
    ctx.write("pivoted", "PIVOT local ON a USING count(*)")
    assert rows(tmp_path / "out" / "written.parquet") == [(2,), (4,), (6,)]
    assert rows(tmp_path / "out" / "pivoted.parquet") == [(1, 1, 1)]
    assert ctx.sql("SELECT * FROM kept").fetchall() == [(1,), (2,), (3,)]


def test_a_python_object_is_found_in_the_helper_that_called_ctx_sql(tmp_path):
    ctx = make_ctx(tmp_path)

    def helper(ctx):
        nearby = pa.table({"x": [5]})  # noqa: F841 -- named by the SQL below
        return ctx.sql("SELECT x FROM nearby").fetchall()

    assert helper(ctx) == [(5,)]
    # As with con.sql, a name held only by another frame further up is not looked for.
    further_up = pa.table({"y": [1]})  # noqa: F841 -- named by the SQL below

    def blind(ctx):
        return ctx.sql("SELECT y FROM further_up")

    with pytest.raises(duckdb.CatalogException, match="further_up"):
        blind(ctx)


def test_every_relation_ctx_returns_reads_a_row_at_a_time_as_duckdb_1_did(tmp_path):
    """A pipeline written for DuckDB 1.x reads a value as ctx.sql(q).fetchone()[0]; DuckDB 2
    raised AttributeError there, so such a pipeline crashed in its first step."""
    source = tmp_path / "landing.csv"
    source.write_text("a\n1\n2\n3\n")
    earlier = tmp_path / "earlier.parquet"
    duckdb.sql(f"COPY (SELECT range AS n FROM range(4)) TO '{earlier}' (FORMAT parquet)")
    visible = {"numbers": ArtifactRef("numbers", "loop/1", 0, "make", earlier, 4)}
    ctx = make_ctx(tmp_path, visible=visible)

    counted = ctx.sql("SELECT count(*) AS n, sum(range) AS s FROM range(5)")
    assert counted.fetchone() == (5, 10)
    assert counted.fetchone() is None  # one row, handed out once, as a cursor does

    several = ctx.sql("SELECT range AS i FROM range(6) ORDER BY i")
    assert several.fetchmany(2) == [(0,), (1,)]
    assert several.fetchone() == (2,)
    assert several.fetchmany() == [(3,)]  # one by default
    assert several.fetchall() == [(4,), (5,)]  # what is left of that result, which it ends
    assert several.fetchall() == [(0,), (1,), (2,), (3,), (4,), (5,)]  # then runs it again
    assert several.fetchmany(4) == [(0,), (1,), (2,), (3,)]
    assert several.fetchmany(4) == [(4,), (5,)] and several.fetchmany(4) == []

    assert ctx.read("numbers").fetchmany(2) == [(0,), (1,)]
    assert ctx.read("numbers").filter("n > 2").fetchone() == (3,)  # derived, too
    assert ctx.source("landing", str(source)).aggregate("max(a)").fetchone() == (3,)
    assert ctx.source("landing", str(source)).fetchall() == [(1,), (2,), (3,)]
    assert ctx.state("kept", "SELECT 7 AS k").fetchone() == (7,)
    assert isinstance(ctx.sql("SELECT 1"), duckdb.DuckDBPyRelation)


def test_the_relation_ctx_source_returns_is_read_or_written_at_once(tmp_path):
    """Counting the source's rows left DuckDB 2 holding an unfinished result, so reading the
    relation ctx.source returned, or writing it, raised "connection has an unfinished result"."""
    source = tmp_path / "landing.csv"
    source.write_text("a\n1\n2\n")
    ctx = make_ctx(tmp_path)
    assert ctx.source("landing", str(source)).fetchall() == [(1,), (2,)]
    ctx.write("copied", ctx.source("again", str(source)))
    assert rows(tmp_path / "out" / "copied.parquet") == [(1,), (2,)]


def test_sql_runs_a_query_once_so_setseed_takes_effect_and_rows_stay_put(tmp_path):
    ctx = make_ctx(tmp_path)
    ctx.sql("SELECT setseed(0.25)")
    drawn = ctx.sql("SELECT random() AS r FROM range(3)")
    assert drawn.fetchall() == drawn.fetchall()  # read twice, the same rows
    again = make_ctx(tmp_path)
    again.sql("SELECT setseed(0.25)")
    assert again.sql("SELECT random() AS r FROM range(3)").fetchall() == drawn.fetchall()


def test_sql_returns_rows_for_pragma_and_runs_every_statement_of_a_script(tmp_path):
    ctx = make_ctx(tmp_path)
    assert ctx.sql("PRAGMA version").fetchall()
    relation = ctx.sql(
        "CREATE TABLE t AS SELECT 1 AS a; INSERT INTO t VALUES (2); SELECT sum(a) FROM t"
    )
    assert relation.fetchall() == [(3,)]


def test_a_change_with_returning_gives_its_rows_once_as_con_sql_does(tmp_path):
    # ctx.sql returned None for an INSERT ... RETURNING, whose rows con.sql hands back.
    ctx = make_ctx(tmp_path)
    ctx.sql("CREATE TABLE t (a INTEGER)")
    inserted = ctx.sql("INSERT INTO t VALUES (1), (2) RETURNING a * 10 AS b")
    assert inserted.columns == ["b"]
    assert inserted.fetchall() == inserted.fetchall() == [(10,), (20,)]
    assert ctx.sql("DELETE FROM t WHERE a = 1 RETURNING *").fetchall() == [(1,)]
    assert ctx.sql("SELECT count(*) FROM t").fetchall() == [(1,)]  # each ran once
    assert ctx.sql("INSERT INTO t VALUES (3)") is None


def test_artifact_names_that_differ_only_in_case_are_refused(write_pipeline, twicerun):
    path = write_pipeline(
        "def a(ctx):\n    ctx.write('T', 'SELECT 1 AS v')\n\n\n"
        "def b(ctx):\n    ctx.write('t', 'SELECT 2 AS v')\n"
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 2
    assert (
        "ctx.write('t') in step 1 b: T is already written by step 0 a, and DuckDB does not "
        "tell names apart by case" in outcome.err
    )


def test_ctx_read_names_an_artifact_whatever_its_case_as_sql_does(write_pipeline, twicerun):
    # DuckDB's `FROM orders` finds a table created as Orders; ctx.read("orders") said no
    # artifact of that name existed, listing Orders among the ones that did.
    path = write_pipeline(
        "def a(ctx):\n    ctx.write('Orders', 'SELECT 1 AS v')\n\n\n"
        "def b(ctx):\n    ctx.read('orders')\n    ctx.write('total', 'SELECT sum(v) AS s FROM ORDERS')\n"
    )
    outcome = twicerun("run", path, "--runs", "2", "--amplify", "--json", "-")
    assert outcome.code == 0, outcome.err
    b = outcome.json()["steps"][1]
    assert (b["inputs"], b["rows_read"]) == (["Orders"], 1)
    assert not any(a["error"] for a in b["amplifiers"])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS v;",
        "SELECT 1 AS v -- the answer",
        "SELECT 1 AS v /* c */ ;  ",
        "FROM (VALUES (1)) t(v)",
    ],
)
def test_a_query_with_a_trailing_semicolon_or_comment_is_written(write_pipeline, twicerun, sql):
    path = write_pipeline(f"def a(ctx):\n    ctx.write('x', {sql!r})\n")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 0, outcome.err


def test_a_query_cannot_close_the_copy_and_write_elsewhere(write_pipeline, twicerun, tmp_path):
    elsewhere = tmp_path / "elsewhere.parquet"
    sql = f"SELECT 1 AS v) TO '{elsewhere}' (FORMAT parquet); COPY (SELECT 1 AS v"
    path = write_pipeline(f"def a(ctx):\n    ctx.write('x', {sql!r})\n")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3  # the step's SQL does not parse: the step crashed
    assert not elsewhere.exists()


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT 1 AS v; SELECT 2 AS v", "give exactly one query, got 2 statements"),
        ("CREATE TABLE y AS SELECT 1 AS v", "got a CREATE statement"),
    ],
)
def test_ctx_write_takes_one_query(write_pipeline, twicerun, sql, said):
    path = write_pipeline(f"def a(ctx):\n    ctx.write('x', {sql!r})\n")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 2
    assert said in outcome.err


def test_state_the_step_never_writes_gets_a_note(write_pipeline, twicerun):
    """ctx.state("log") beside ctx.write("logs") starts every run from the initial query,
    so the rerun the state is there to test never happens; nothing used to say so."""
    path = write_pipeline(
        "def a(ctx):\n"
        "    ctx.state('log', 'SELECT 1 AS v')\n"
        "    ctx.write('logs', 'SELECT * FROM log UNION ALL SELECT 2')\n"
        "\n\n"
        "def b(ctx):\n"
        "    ctx.state('kept', 'SELECT 1 AS v')\n"
        "    ctx.write('kept', 'SELECT DISTINCT * FROM kept')\n"
    )
    outcome = twicerun("run", path, "--runs", "2", "--no-amplify", "--json", "-")
    a, b = outcome.json()["steps"]
    assert a["notes"] == [
        "ctx.state('log') reads this step's own earlier output of that name, but the step "
        "writes no artifact called log, so every run started from the initial query"
    ]
    assert b["notes"] == []


def test_a_step_whose_reruns_on_its_own_state_agree_with_each_other_gets_a_note(
    write_pipeline, twicerun
):
    """An append differs in every later run, and the report's cause line left "state the
    step appends to" among the guesses, though twicerun knew the step read its own output,
    that every rerun on it wrote the same rows, and that one thread did the same. Said
    where it holds, and only there."""
    path = write_pipeline(
        "import random\n\n\n"
        "def append(ctx):\n"
        "    ctx.state('log', 'SELECT 1 AS v')\n"
        "    ctx.write('log', 'SELECT * FROM log UNION ALL SELECT 2')\n"
        "\n\n"
        "def idempotent(ctx):\n"
        "    ctx.state('kept', 'SELECT 1 AS v')\n"
        "    ctx.write('kept', 'SELECT DISTINCT * FROM kept')\n"
        "\n\n"
        "def drifts(ctx):\n"
        "    ctx.state('seen', 'SELECT 1 AS v')\n"
        "    ctx.write('seen', f'SELECT {random.random()} AS v')\n"
        "\n\n"
        "_first = [True]\n"
        "\n\n"
        "def first_in_process(ctx):\n"
        "    ctx.state('warm', 'SELECT 1 AS v')\n"
        "    ctx.write('warm', f'SELECT {int(_first[0])} AS v')\n"
        "    _first[0] = False\n"
    )
    said = (
        "reads its own earlier output (log) through ctx.state: run 1 started from the initial "
        "query and every later run from run 1's copy, and the later runs all wrote the same rows, "
        "which run 1 did not, as did the re-executions at one thread: rerunning the step on "
        "its own output changes its answer (an append, or a MERGE that is not idempotent)"
    )
    outcome = twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-")
    append, idempotent, drifts, first = outcome.json()["steps"]
    assert append["notes"] == [said]
    assert idempotent["notes"] == []
    # Later runs that disagree with each other have more going on than the state.
    assert drifts["fired"] == 2 and not any("ctx.state" in n for n in drifts["notes"])
    # Run 1 alone differed, but because it was the process's first execution of the step:
    # the bisect's run 1, also from the initial query, agrees with the later runs. Not the
    # state, then, but the module list run 1 changed, which is named; and one thread going
    # quiet on the list as run 1 left it is no cause.
    assert first["fired"] == 2 and first["notes"] == [
        "reads _first of its file, which a later run did not find as run 1 did: what another "
        "step, or an earlier run, changes there reaches this step past containment, so a "
        "difference here may come from there (hand the rows over with ctx.write and ctx.read)"
    ]
    assert first["cause"] is None
    # Uncontained, each run starts from the one before it: no two reruns start alike.
    outcome = twicerun(
        "run", path, "--runs", "3", "--no-amplify", "--no-containment", "--json", "-"
    )
    assert outcome.json()["steps"][0]["notes"] == []
    # With one later run, nothing says its answer would repeat.
    outcome = twicerun("run", path, "--runs", "2", "--no-amplify", "--json", "-")
    assert outcome.json()["steps"][0]["notes"] == []
    text = twicerun("run", path, "--runs", "3", "--no-amplify").out
    assert f"        note: {said}\n" in text


def test_what_a_steps_subprocess_prints_cannot_corrupt_the_json_on_stdout(write_pipeline, tmp_path):
    """`print` went to stderr, but descriptor 1 was still stdout: a step that ran a copy
    tool (here `echo`) or wrote with os.write(1, ...) put its words before the Result, and
    `--json -` stopped being JSON. The same for the audit's executions."""
    import json
    import subprocess
    import sys

    path = write_pipeline(
        """
        import os
        import subprocess


        def a(ctx):
            subprocess.run(["echo", "from a subprocess"], check=True)
            os.write(1, b"straight to descriptor 1\\n")
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    base = [sys.executable, "-m", "twicerun"]
    for args in (
        ["run", str(path), "--runs", "2", "--no-amplify", "--run-dir", str(tmp_path / "r")],
        ["audit", str(path)],
    ):
        done = subprocess.run(
            [*base, *args, "--json", "-"], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["schema"].startswith("twicerun.")
        assert "from a subprocess" in done.stderr and "straight to descriptor 1" in done.stderr


def test_what_a_thread_of_a_step_prints_after_the_step_cannot_corrupt_the_json(
    write_pipeline, tmp_path
):
    """A thread a step started and left running printed into sys.stdout between steps and
    while the CLI wrote the Result: `chatter 22` stood in front of `--json -`'s document."""
    import json
    import subprocess
    import sys

    path = write_pipeline(
        """
        import threading
        import time


        def _chatter():
            for i in range(150):
                print(f"chatter {i}")
                time.sleep(0.01)


        def a(ctx):
            threading.Thread(target=_chatter, daemon=True).start()
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", "run", str(path), "--runs", "2", "--no-amplify",
         "--run-dir", str(tmp_path / "r"), "--json", "-"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"].startswith("twicerun.")
    assert "chatter 0" in done.stderr


@pytest.mark.parametrize(
    "move",
    [
        "os.chdir({where!r})",
        # Other ways a step can move the whole process: a file descriptor, or a
        # contextlib.chdir it never leaves.
        "os.fchdir(os.open({where!r}, os.O_RDONLY))",
        "contextlib.chdir({where!r}).__enter__()",
    ],
    ids=["chdir", "fchdir", "contextlib"],
)
def test_a_step_that_changes_directory_breaks_nothing(
    write_pipeline, twicerun, tmp_path, monkeypatch, move
):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = write_pipeline(
        f"import contextlib, os\n\n\ndef a(ctx):\n    {move.format(where=str(elsewhere))}\n"
        f"    ctx.write('x', 'SELECT 1 AS v')\n\n\n"
        f"def b(ctx):\n    ctx.read('x')\n    ctx.write('y', 'SELECT v + 1 AS v FROM x')\n"
    )
    before = Path.cwd()
    outcome = twicerun("run", path, "--runs", "3", "--run-dir", "relative-runs")
    assert outcome.code == 0, outcome.err
    assert Path.cwd() == before
    assert (tmp_path / "relative-runs").is_dir()
    assert not (elsewhere / "relative-runs").exists()


def test_connections_open_ahead_only_as_many_as_are_expected(opened_connections):
    """Each connection opened ahead costs as much CPU as a tiny step; one nobody takes is
    waste, and a small pipeline's invocation would otherwise end with several of them."""
    from twicerun.storage import connections as connections_module

    opened = opened_connections
    connections = connections_module.Connections()
    try:
        connections.expect(1, 3)
        for _ in range(3):
            connections.close(connections.open(1))
        # Without a word about what comes, the helpers keep AHEAD ready.
        connections.close(connections.open(2))
    finally:
        connections.shutdown()
    assert opened.count(1) == 3
    assert opened.count(2) == 1 + connections_module.Connections.AHEAD


def stored_types(path: Path) -> dict[str, str]:
    described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    return {name: type_ for name, type_, *_ in described}


def test_an_integer_sum_is_stored_exactly_not_as_a_double(tmp_path):
    """DuckDB's Parquet writer turns HUGEINT (what sum() of integers returns) into DOUBLE;
    an integer total must reach the oracle as an integer, every digit kept."""
    ctx = make_ctx(tmp_path)
    ctx.write("total", "SELECT sum(x) + 9007199254740992 AS total FROM range(2) t(x)")
    ctx.write("from_relation", ctx.sql("SELECT 12::UHUGEINT AS n, 'a' AS label"))
    ctx.write(
        "nested",
        "SELECT [sum(x)] AS totals, {'hugeint': sum(x), 'label': 'a'} AS s, 2.5 AS ratio "
        "FROM range(3) t(x)",
    )
    out = tmp_path / "out"
    assert stored_types(out / "total.parquet") == {"total": "DECIMAL(38,0)"}
    (total,) = pq.read_table(out / "total.parquet").column("total").to_pylist()
    assert total == 9007199254740993  # 2**53 + 1, which no double holds
    assert stored_types(out / "from_relation.parquet") == {"n": "DECIMAL(38,0)", "label": "VARCHAR"}
    assert stored_types(out / "nested.parquet") == {
        "totals": "DECIMAL(38,0)[]",
        "s": 'STRUCT(hugeint DECIMAL(38,0), "label" VARCHAR)',
        "ratio": "DECIMAL(2,1)",
    }


def test_a_pivot_whose_columns_change_between_binds_is_written_from_one(tmp_path):
    """Storing a 128-bit total exactly binds the query twice (once to find the column,
    once in the COPY), and a PIVOT without an IN list takes its columns from the rows:
    here each bind draws a new sequence value, so the cast named a column the COPY's
    PIVOT no longer had and a correct step raised a binder error."""
    ctx = make_ctx(tmp_path)
    ctx.sql("CREATE SEQUENCE s")
    ctx.write("wide", "PIVOT (SELECT 'c' || nextval('s') AS k, 7::HUGEINT AS v) ON k USING sum(v)")
    types = stored_types(tmp_path / "out" / "wide.parquet")
    assert list(types.values()) == ["DECIMAL(38,0)"]
    leftover = ctx.sql(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '__twicerun_write%'"
    )
    assert leftover.fetchall() == [(0,)]


def test_an_integer_past_38_digits_is_refused_by_column(tmp_path):
    ctx = make_ctx(tmp_path)
    with pytest.raises(ContractError) as refused:
        ctx.write(
            "big", "SELECT 1 AS id, 170141183460469231731687303715884105727::HUGEINT AS too_big"
        )
    assert str(refused.value) == (
        "ctx.write('big', data) in step 1 step: too_big holds an integer of more than 38 digits, "
        "which Parquet cannot store exactly (twicerun stores HUGEINT and UHUGEINT as "
        "DECIMAL(38,0)); cast it in the step, to VARCHAR to keep every digit or to DOUBLE if an "
        "approximation will do"
    )
    assert not list((tmp_path / "out").glob("*big*"))
    with pytest.raises(ContractError, match=r"step 1 step: one of small and too_big holds an"):
        ctx.write(
            "two",
            "SELECT 1::HUGEINT AS small, 170141183460469231731687303715884105727::HUGEINT AS too_big",
        )


def test_a_step_whose_total_differs_past_two_to_the_53_is_caught_as_rows(write_pipeline, twicerun):
    """Stored as doubles, 2**53 + 1 and 2**53 + 2 were both 2**53, and this rerun-dependent
    ledger looked deterministic; an integer that changed was called float drift."""
    path = write_pipeline(
        """
        def ledger(ctx):
            ctx.state("ledger", "SELECT 9007199254740992::HUGEINT AS total")
            ctx.write("ledger", "SELECT sum(total) + 1 AS total FROM ledger")
        """
    )
    document = twicerun("run", path, "--runs", "3", "--json", "-").json()
    (step,) = document["steps"]
    assert (step["fired"], step["compared"]) == (2, 2)
    assert step["classes"] == ["ROW_MISSING", "ROW_EXTRA"]


@pytest.mark.parametrize(
    ("query", "draws"),
    [
        ("SELECT id FROM t USING SAMPLE 10 ROWS", True),
        ("SELECT id FROM t USING SAMPLE 10%", True),
        ("SELECT id FROM t USING SAMPLE 10% (bernoulli)", True),
        ("SELECT id FROM t USING SAMPLE 10% WHERE id IN (1, 2)", True),
        ("SELECT id FROM t USING SAMPLE 10% (bernoulli, 42)", False),
        ("SELECT id FROM t USING SAMPLE reservoir(50 ROWS) REPEATABLE (100)", False),
        ("SELECT id FROM t USING SAMPLE 10% (system) REPEATABLE (377)", False),
        ("SELECT count(*) FROM t TABLESAMPLE 10% (system, 7)", False),
        ("SELECT count(*) FROM t TABLESAMPLE 5 PERCENT", True),
        ("SELECT id FROM t ORDER BY random() LIMIT 3", True),
        ("SELECT id, RANDOM ( ) AS r FROM t", True),
        ("SELECT gen_random_uuid() AS u", True),
        ("SELECT uuid() AS u", True),
        ("SELECT md5(id::VARCHAR)::UUID AS u, random_column FROM t", False),
        ("SELECT id FROM t ORDER BY id", False),
    ],
)
def test_which_sql_draws_at_random_without_a_seed(query, draws):
    """The queries the loop names for a step one thread did not quiet: a sample's seed is
    written after its size, as (method, seed) or REPEATABLE (seed), and a list after the
    sample is not one."""
    from twicerun.storage.context import first_draw

    assert (first_draw(query) is not None) is draws
    if "random()" in query:
        assert first_draw(query, seeded=True) is None


def test_a_relation_built_to_draw_at_random_is_noted_as_its_sql_would_be(tmp_path):
    """A draw made with the relation API (`rel.order("random()")`) is in no string the
    step handed ctx, and a step writing one got the bare PERSISTS_SINGLE_THREADED line;
    the query DuckDB renders for the relation is read as a query string is. A relation
    over rows ctx.sql already holds draws nothing more, and is not noted twice."""
    ctx = make_ctx(tmp_path)
    base = ctx.sql("SELECT * FROM range(20) t(id)")
    ctx.write("shuffled", base.order("random()").limit(5))
    ctx.write("kept", base.filter("id % 2 = 0").order("id"))
    ctx.write("drawn", ctx.sql("SELECT id, uuid() AS u FROM range(3) t(id)"))
    shuffled, drawn = ctx.output.sql_draws
    # As DuckDB renders the relation: 2.x gives this, 1.x names the subquery `main.(...)`.
    assert shuffled.replace("main.(", "(") == (
        "SELECT * FROM (SELECT * FROM range(20) t(id)) ORDER BY random() LIMIT 5"
    )
    assert drawn == "SELECT id, uuid() AS u FROM range(3) t(id)"
    seeded = make_ctx(tmp_path / "seeded")
    seeded.sql("SELECT setseed(0.25)")
    seeded.write("shuffled", seeded.sql("SELECT * FROM range(20) t(id)").order("random()"))
    assert seeded.output.sql_draws == []


def test_a_long_query_is_quoted_where_it_draws_and_marked_where_it_was_cut(tmp_path):
    """The note quoted a query's first 200 characters, cut without a mark: a draw past
    them (random() in a subquery after a long column list) was left out of the very quote
    that names the query as the one that draws, and the cut read as the query's end."""
    columns = ", ".join(f"id + {i} AS c{i}" for i in range(30))
    wanted = ", ".join(str(i) for i in range(60))
    query = (
        f"SELECT {columns} FROM (SELECT id + (random() * 2)::INT AS id FROM range(5) t(id)) "
        f"WHERE c0 IN ({wanted})"
    )
    ctx = make_ctx(tmp_path)
    ctx.write("wide", query)
    (quoted,) = ctx.output.sql_draws
    draw = query.index("random()")
    assert draw > 400
    assert quoted == f"…{query[draw - 66 : draw + 134]}…"
    assert (
        quoted.startswith("…id + 27 AS c27") and "FROM (SELECT id + (random() * 2)::INT" in quoted
    )
    # A draw at the end is quoted with the end, marked only where it was cut.
    ctx.write("tail", query[: query.index(" WHERE")])
    assert ctx.output.sql_draws[1].startswith("…") and ctx.output.sql_draws[1].endswith("t(id))")
    # A short query is quoted whole, with no mark.
    ctx.write("short", "SELECT uuid() AS u")
    assert ctx.output.sql_draws[2] == "SELECT uuid() AS u"


@pytest.mark.parametrize(
    ("query", "draws"),
    [
        ("SELECT id FROM t ORDER BY rand() LIMIT 3", True),
        ("SELECT randn() AS r", True),
        ("SELECT uuid() AS u", True),
        ("SELECT shuffle(array(1, 2, 3)) AS s", True),
        ("SELECT * FROM t TABLESAMPLE (10 PERCENT)", True),
        ("SELECT * FROM t TABLESAMPLE (5 ROWS)", True),
        ("SELECT * FROM t TABLESAMPLE (10 PERCENT) REPEATABLE (42)", False),
        ("SELECT rand(7) AS r", False),
        ("SELECT * FROM t TABLESAMPLE (BUCKET 1 OUT OF 4 ON id)", False),
        ("SELECT id FROM t ORDER BY id", False),
    ],
)
def test_which_spark_sql_draws_at_random_without_a_seed(query, draws):
    """Spark's names for the same draws; rand(7) is seeded (per partition, which the
    thread-count amplifier varies), and a bucket of a column is no draw."""
    from twicerun.storage.context import spark_first_draw

    assert (spark_first_draw(query) is not None) is draws
