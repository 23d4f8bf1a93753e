"""A step sees only what it reads: nothing one step makes in DuckDB reaches the next,
whatever gives each step its fresh state (a pooled database, a new cursor, a new
catalog), and the thread count is the run's."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

# Step `make` leaves one of everything behind; step `look` reports what it can see.
LEAKY = """
def make(ctx):
    for statement in [
        "CREATE TABLE leaked_table AS SELECT 1 AS x",
        "CREATE VIEW leaked_view AS SELECT 1 AS x",
        "CREATE MACRO leaked_macro(x) AS x + 1",
        "CREATE SEQUENCE leaked_sequence",
        "SET threads = 1",
        "SET default_order = 'DESC'",
        "SET preserve_insertion_order = false",
        "ATTACH ':memory:' AS leaked_database",
        "CREATE TEMP TABLE leaked_temp AS SELECT 1 AS x",
        "CREATE TEMP MACRO leaked_temp_macro(x) AS x",
        "SET VARIABLE leaked_variable = 42",
        "USE memory",
        "CREATE TABLE leaked_in_shared AS SELECT 1 AS x",
        "CREATE MACRO leaked_shared_macro(x) AS x",
    ]:
        ctx.sql(statement)
    ctx.write("made", "SELECT 1 AS x")


def look(ctx):
    seen = ctx.sql(\"\"\"
        SELECT 'table ' || table_name AS what FROM duckdb_tables() WHERE table_name LIKE 'leaked%'
        UNION ALL SELECT 'view ' || view_name FROM duckdb_views() WHERE view_name LIKE 'leaked%'
        UNION ALL SELECT 'macro ' || function_name FROM duckdb_functions() WHERE function_name LIKE 'leaked%'
        UNION ALL SELECT 'sequence ' || sequence_name FROM duckdb_sequences() WHERE sequence_name LIKE 'leaked%'
        UNION ALL SELECT 'database ' || database_name FROM duckdb_databases() WHERE database_name LIKE 'leaked%'
        UNION ALL SELECT 'variable' WHERE getvariable('leaked_variable') IS NOT NULL
        UNION ALL SELECT 'setting default_order' WHERE current_setting('default_order') = 'desc'
        UNION ALL SELECT 'setting preserve_insertion_order'
            WHERE NOT current_setting('preserve_insertion_order')
        UNION ALL SELECT 'threads ' || current_setting('threads')
    \"\"\").fetchall()
    rows = ", ".join("('" + r[0].replace("'", "''") + "')" for r in seen)
    ctx.write("seen", f"SELECT * FROM (VALUES {rows}) AS v(what)")
"""


@pytest.mark.parametrize("threads", ["2", "3"])
def test_nothing_one_step_makes_is_visible_to_the_next(twicerun, write_pipeline, threads):
    path = write_pipeline(LEAKY)
    outcome = twicerun(
        "run", path, "--runs", "3", "--threads", threads, "--keep-copies", "--json", "-"
    )
    assert outcome.code == 0, outcome.err
    root = outcome.json()["artifacts"]
    seen = pq.read_table(Path(root, "loop", "1", "01-look", "seen.parquet"))
    # Only the thread count shows, and it is the run's.
    assert seen.column("what").to_pylist() == [f"threads {threads}"]
    # Every later run saw exactly that too (its copy matched run 1's, so it was pruned).
    look = outcome.json()["steps"][1]
    assert (look["fired"], look["compared"]) == (0, 2)


def test_a_database_file_a_step_attached_is_let_go_before_the_next_execution(
    twicerun, write_pipeline, tmp_path, monkeypatch
):
    """DuckDB lets one database in a process hold a file. Connections were closed on a
    helper thread behind the loop, so the next execution's ATTACH of the same file raced
    that close and raised "Unique file handle conflict" (in one of four invocations of a
    two-step pipeline here): a correct step crashed (exit 3), or its bisect named no
    cause. The helper's close is slowed here so that the race is lost every time."""
    import time

    from twicerun.storage.connections import Connections

    def slow_close(self, connection):
        self._helper.submit(lambda: (time.sleep(0.5), connection.close()))

    monkeypatch.setattr(Connections, "close", slow_close)
    shared = tmp_path / "shared.db"
    path = write_pipeline(
        f"""
        def first(ctx):
            ctx.sql("ATTACH '{shared}' AS shared")
            ctx.sql("CREATE TABLE IF NOT EXISTS shared.codes AS SELECT range AS code FROM range(3)")
            ctx.write("codes", "SELECT code FROM shared.codes")


        def second(ctx):
            ctx.sql("ATTACH '{shared}' AS shared (READ_ONLY)")
            ctx.write("n", "SELECT count(*) AS n FROM shared.codes")
        """
    )
    outcome = twicerun("run", path, "--runs", "3")
    assert outcome.code == 0, outcome.err


DEFAULT_CONNECTION = """
import duckdb as db

# Set up on DuckDB's default connection as the file is imported, for every step to use.
db.sql("CREATE OR REPLACE TABLE lookup AS SELECT range AS k FROM range(5)")
LOOKUP = db.sql("SELECT * FROM lookup")


def make(ctx):
    ctx.write("made", "SELECT i % 1000 AS g, (hash(i) % 100000) / 7.0 AS x FROM range(2000000) r(i)")


def look(ctx):
    ctx.read("made")
    threads = db.sql("SELECT current_setting('threads') AS t").fetchall()[0][0]
    ctx.write("seen", f"SELECT {threads} AS threads, {len(db.sql('FROM LOOKUP').fetchall())} AS k")


def drifts(ctx):
    from duckdb import sql

    t = ctx.read("made").to_arrow_table()
    ctx.write("sums", sql("SELECT g, sum(x) AS s FROM t GROUP BY g"))
"""


def test_duckdb_s_default_connection_runs_at_the_run_s_threads(twicerun, write_pipeline):
    """`duckdb.sql()` in a step runs on DuckDB's process-wide default connection, at that
    connection's own thread count: the bisect's one thread never reached it, and a sum
    that drifted with the order threads added in was called PERSISTS_SINGLE_THREADED.
    While such a step runs, the default is at the run's count. It stays the process's
    connection, so what the pipeline set up there as it was imported is still there."""
    import duckdb

    before = duckdb.sql("SELECT current_setting('threads')").fetchall()
    path = write_pipeline(DEFAULT_CONNECTION)
    outcome = twicerun("run", path, "--runs", "5", "--threads", "2", "--json", "-")
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    root = Path(outcome.json()["artifacts"])
    seen = pq.read_table(root / "loop" / "1" / "01-look" / "seen.parquet").to_pylist()
    assert seen == [{"threads": 2, "k": 5}]
    assert steps["drifts"]["fired"] > 0
    assert steps["drifts"]["cause"] == "PARALLEL_ORDER"
    assert duckdb.sql("SELECT current_setting('threads')").fetchall() == before


HELPED = """
import duckdb

import queries
from queries import threads_now


def _threads_seen():
    return duckdb.sql("SELECT current_setting('threads')").fetchall()[0][0]


def same_file(ctx):
    ctx.write("same_file", f"SELECT {_threads_seen()} AS t")


def own_module(ctx):
    ctx.write("own_module", f"SELECT {queries.threads_now()} AS t, {threads_now()} AS u")
"""

QUERIES = """
import duckdb


def threads_now():
    return duckdb.sql("SELECT current_setting('threads')").fetchall()[0][0]
"""


def test_a_helper_that_calls_duckdb_sql_for_the_step_runs_at_the_run_s_threads(
    twicerun, write_pipeline
):
    """Only a step whose own code named duckdb had the default connection set to its thread
    count, so a helper function beside it in the file, or in a module of the pipeline's
    directory, ran `duckdb.sql` at DuckDB's own count, and the bisect's one thread never
    reached it."""
    import duckdb

    default = duckdb.sql("SELECT current_setting('threads')").fetchall()[0][0]
    threads = 1 if default != 1 else 3
    write_pipeline(QUERIES, "queries.py")
    path = write_pipeline(HELPED)
    outcome = twicerun("run", path, "--runs", "2", "--threads", str(threads), "--json", "-")
    assert outcome.code == 0, outcome.err
    root = Path(outcome.json()["artifacts"])
    same = pq.read_table(root / "loop" / "1" / "00-same_file" / "same_file.parquet")
    own = pq.read_table(root / "loop" / "1" / "01-own_module" / "own_module.parquet")
    assert same.to_pylist() == [{"t": threads}]
    assert own.to_pylist() == [{"t": threads, "u": threads}]


KEPT_CONNECTIONS = """
import duckdb

import stores

CON = duckdb.connect(config={"threads": 3})


def file_level(ctx):
    ctx.write("file_level", CON.sql("SELECT current_setting('threads') AS t").to_arrow_table())


def helper_module(ctx):
    ctx.write("helper_module", f"SELECT {stores.threads_now()} AS t")
"""

STORES = """
import duckdb

CON = duckdb.connect(config={"threads": 3})


def threads_now():
    return CON.sql("SELECT current_setting('threads')").fetchall()[0][0]
"""


def test_a_connection_the_pipeline_keeps_runs_at_the_run_s_threads(twicerun, write_pipeline):
    """A `duckdb.connect()` at the top of the pipeline file, or of a module beside it, runs at
    its own thread count: the bisect's one thread never reached it, and a sum on it that
    drifted with the order threads added in was called PERSISTS_SINGLE_THREADED. While a
    step whose code reaches one runs, it is at the run's count."""
    write_pipeline(STORES, "stores.py")
    path = write_pipeline(KEPT_CONNECTIONS)
    outcome = twicerun("run", path, "--runs", "2", "--threads", "1", "--json", "-")
    assert outcome.code == 0, outcome.err
    root = Path(outcome.json()["artifacts"])
    for name in ("file_level", "helper_module"):
        (written,) = (root / "loop" / "1").glob(f"*-{name}/{name}.parquet")
        assert pq.read_table(written).to_pylist() == [{"t": 1}], name


OWN_DATABASES = """
import duckdb
from duckdb import connect as open_database

STORE = duckdb.connect({store!r})


def threads_of(con):
    return con.sql("SELECT current_setting('threads')").fetchall()[0][0]


def opens_one(ctx):
    con = duckdb.connect()
    told = duckdb.connect(config={{"threads": {told}}})
    again = duckdb.connect({store!r})  # refused had its config differed from STORE's
    named = open_database()
    ctx.write(
        "seen",
        f"SELECT {{threads_of(con)}} AS t, {{threads_of(told)}} AS told, "
        f"{{len(again.sql('SELECT 1').fetchall())}} AS again, {{threads_of(named)}} AS named",
    )
"""


def test_a_database_a_step_opens_itself_runs_at_the_run_s_threads(
    twicerun, write_pipeline, tmp_path
):
    """`duckdb.connect()` in a step opened a database at DuckDB's count, one thread per core,
    so the bisect's one thread never reached it and a float sum on it that drifted with
    thread order was called PERSISTS_SINGLE_THREADED. A thread count the step gives is
    kept, and a second connection to a file the pipeline already holds still opens. A
    `connect` imported by name (`from duckdb import connect`) was bound before the step
    ran, and opened at DuckDB's count until its name was pointed at the same wrapper."""
    # Neither DuckDB's own count (one per core) nor the one the step gives.
    threads = (os.cpu_count() or 1) + 1
    told = threads + 1
    store = str(tmp_path / "store.duckdb")
    path = write_pipeline(OWN_DATABASES.format(store=store, told=told))
    outcome = twicerun("run", path, "--runs", "2", "--threads", str(threads), "--json", "-")
    assert outcome.code == 0, outcome.err
    root = Path(outcome.json()["artifacts"])
    seen = pq.read_table(root / "loop" / "1" / "00-opens_one" / "seen.parquet")
    assert seen.to_pylist() == [{"t": threads, "told": told, "again": 1, "named": threads}]
    # The name the pipeline bound is duckdb's own again once the step is done.
    import duckdb

    assert duckdb.connect.__module__ == "_duckdb"


ARROW_POOL = """
import pyarrow as pa

LOG = {log!r}


def noisy(ctx):
    with open(LOG, "a") as log:
        log.write(f"{{ctx.threads}} {{pa.cpu_count()}}\\n")
    ctx.write("drawn", "SELECT random() AS r")


def quiet(ctx):
    with open(LOG, "a") as log:
        log.write(f"{{ctx.threads}} {{pa.cpu_count()}}\\n")
    ctx.write("fixed", "SELECT 1 AS one")
"""


def test_pyarrow_s_compute_runs_at_each_execution_s_threads(twicerun, write_pipeline, tmp_path):
    """A step may group or sum in pyarrow (`Table.group_by`), whose pool is the machine's
    cores whatever DuckDB was told: the bisect's one thread did not reach it, and a step
    whose sums drifted with that pool's order was called PERSISTS_SINGLE_THREADED. Every
    execution now sets the pool to its own count (the loop's, the bisect's one, an
    amplifier's raised count) and puts the process's back after."""
    import pyarrow as pa

    before = pa.cpu_count()
    log = tmp_path / "threads.log"
    path = write_pipeline(ARROW_POOL.format(log=str(log)))
    outcome = twicerun("run", path, "--runs", "3", "--threads", "3", "--amplify")
    assert outcome.code == 1, outcome.err
    seen = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    assert all(threads == pool for threads, pool in seen), seen
    assert {threads for threads, _ in seen} >= {1, 3, 6}
    assert pa.cpu_count() == before


# A step that makes a table on DuckDB's default connection: fine in a pipeline run once
# per process, and there again for every later run of twicerun, which are all in one.
MAKES_ON_THE_DEFAULT = """
import duckdb


def make(ctx):
    ctx.write("base", "SELECT i AS id, i % 7 AS g FROM range(1000) t(i)")


def staged(ctx):
    base = ctx.read("base").arrow()
    duckdb.sql("{make}")
    duckdb.sql("INSERT INTO {table} SELECT * FROM base")
    ctx.write("staged", duckdb.sql("SELECT g, count(*) AS n FROM {table} GROUP BY g").arrow())
"""


@pytest.fixture
def default_table(request):
    """A table name no other test uses on the default connection, which the tests of one
    worker share, dropped again after the test."""
    import duckdb

    name = f"staging_{abs(hash(request.node.nodeid)) % 10**8}"
    yield name
    duckdb.sql(f"DROP TABLE IF EXISTS {name}")


def test_a_table_run_1_made_on_the_default_connection_is_named_when_run_2_finds_it(
    twicerun, write_pipeline, run_dir, default_table
):
    """Run 2 raised "already exists" and the report said the step's failing changes from
    run to run, to look at a service, a clock, a file or a race: none of which it was."""
    make = f"CREATE TABLE {default_table} (id BIGINT, g BIGINT)"
    path = write_pipeline(MAKES_ON_THE_DEFAULT.format(make=make, table=default_table))
    outcome = twicerun("run", path, "--runs", "2")
    (kept,) = [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
    assert outcome.code == 3
    assert outcome.err == (
        f"twicerun: step 1 staged raised in run 2 (at {path}:10): CatalogException: Catalog "
        f'Error: Table with name "{default_table}" already exists!\ntwicerun: it ran to the '
        "end in run 1 and raised in run 2: its code runs SQL on DuckDB's default connection "
        "(duckdb.sql() and the like), which is the process's, and every run of twicerun is in "
        "one process, so what an earlier execution made there was still there; ctx.sql runs "
        "it on the step's own connection, which starts empty every time\ntwicerun: the "
        f"invocation directory is kept: {kept}\n"
    )


def test_a_table_run_1_made_on_a_connection_the_pipeline_keeps_is_named_too(
    twicerun, write_pipeline, run_dir
):
    """The same with `CON = duckdb.connect()` at the top of the file, named as that, not as
    the default connection."""
    path = write_pipeline(
        """
        import duckdb

        CON = duckdb.connect()


        def staged(ctx):
            CON.sql("CREATE TABLE staging AS SELECT 1 AS one")
            ctx.write("staged", CON.sql("SELECT one FROM staging").to_arrow_table())
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    (kept,) = [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
    assert outcome.code == 3
    assert outcome.err == (
        f"twicerun: step 0 staged raised in run 2 (at {path}:7): CatalogException: Catalog "
        'Error: Table with name "staging" already exists!\ntwicerun: it ran to the end in run '
        "1 and raised in run 2: its code runs SQL on a DuckDB connection the pipeline keeps "
        "(CON), which outlives the step, and every run of twicerun is in one process, so what "
        "an earlier execution made there was still there; ctx.sql runs it on the step's own "
        f"connection, which starts empty every time\ntwicerun: the invocation directory is "
        f"kept: {kept}\n"
    )


def test_a_table_a_step_fills_on_the_default_connection_is_named_beside_its_cause(
    twicerun, write_pipeline, default_table
):
    """Made if missing and filled every time, the table grew run by run and the step
    differed at one thread: PERSISTS_SINGLE_THREADED, with nothing saying where to look.
    What the pipeline set up there as it was imported is not named (`lookup`)."""
    make = f"CREATE TABLE IF NOT EXISTS {default_table} (id BIGINT, g BIGINT)"
    source = MAKES_ON_THE_DEFAULT.format(make=make, table=default_table)
    source = source.replace(
        "import duckdb\n",
        'import duckdb\n\nduckdb.sql("CREATE OR REPLACE TABLE lookup AS SELECT 1 AS k")\n',
    )
    path = write_pipeline(source)
    outcome = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-")
    staged = outcome.json()["steps"][1]
    assert (staged["status"], staged["cause"]) == ("DIVERGENT", "PERSISTS_SINGLE_THREADED")
    assert staged["notes"] == [
        "its code runs SQL on DuckDB's default connection (duckdb.sql() and the like), which "
        f"is the process's, and since the pipeline was imported the steps have made table "
        f"{default_table} there; every run of twicerun is in one process, so each execution "
        "finds what the earlier ones left (a table a step inserts into grows run by run), and "
        "ctx.sql runs on the step's own connection, which starts empty every time"
    ]
    # A step that differed for another reason, with nothing made there, gets no such note.
    assert outcome.json()["steps"][0]["notes"] == []


CACHED_ON_THE_DEFAULT = """
import duckdb


def firsts(ctx):
    duckdb.sql("{make} {table} AS SELECT range % 5 AS k, max(range) AS v FROM range(100) GROUP BY 1")
    ctx.write("firsts", duckdb.sql("SELECT * FROM {table}").arrow())
"""


def test_a_cache_on_a_connection_the_pipeline_keeps_is_named_with_the_connection(
    twicerun, write_pipeline
):
    source = CACHED_ON_THE_DEFAULT.format(make="CREATE TABLE IF NOT EXISTS", table="cache")
    source = source.replace("import duckdb\n", "import duckdb\n\nCON = duckdb.connect()\n")
    path = write_pipeline(source.replace("duckdb.sql(", "CON.sql("))
    (step,) = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    (note,) = step["notes"]
    assert note.startswith(
        "made table cache on the connection the pipeline keeps as CON in run 1; that "
        "connection outlives the step,"
    )


@pytest.mark.parametrize("make", ["CREATE TABLE IF NOT EXISTS", "CREATE OR REPLACE TABLE"])
def test_a_step_whose_answer_stays_where_run_1_left_it_is_told_its_quiet_runs_mean_nothing(
    twicerun, write_pipeline, default_table, make
):
    """Made on the default connection in run 1 only and read from there in every run, the
    answer was computed once, and the step came out NO_DIVERGENCE_OBSERVED with every
    amplifier listed as varied, whatever its query does. A table made again in every
    run (CREATE OR REPLACE: a new catalog identity) is computed every run and not named."""
    path = write_pipeline(CACHED_ON_THE_DEFAULT.format(make=make, table=default_table))
    (step,) = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    note = (
        f"made table {default_table} on DuckDB's default connection (duckdb.sql() and the "
        "like) in run 1; that connection outlives the step, every run of twicerun is in one "
        "process, and no later execution made it again: if the step takes its answer from "
        "there (CREATE TABLE IF NOT EXISTS, a cache), the later runs did not compute it, so "
        "their agreeing, or any amplifier's, says nothing about its inputs; ctx.sql runs on "
        "the step's own connection, which starts empty every time"
    )
    assert step["status"] == "NO_DIVERGENCE_OBSERVED"
    assert step["notes"] == ([note] if make.endswith("EXISTS") else [])


# One step makes a table on a connection that outlives it, a later one reads it there.
HANDED_OVER_PAST_CTX = """
import duckdb

{keep}


def build(ctx):
    {on}.sql("CREATE OR REPLACE TABLE {table} AS SELECT i, random() AS r FROM range(100) t(i)")
    ctx.write("marker", "SELECT 1 AS one")


def use(ctx):
    ctx.write("out", {on}.sql("SELECT i, r > 0.5 AS big FROM {table} ORDER BY i").arrow())
"""


def _handed_over(kept: bool, table: str) -> tuple[str, str]:
    """HANDED_OVER_PAST_CTX on a connection the pipeline keeps or on the default one, and
    the place the report names."""
    source = HANDED_OVER_PAST_CTX.format(
        keep="CON = duckdb.connect()" if kept else "", on="CON" if kept else "duckdb", table=table
    )
    place = (
        "the connection the pipeline keeps as CON"
        if kept
        else "DuckDB's default connection (duckdb.sql() and the like)"
    )
    return source, place


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "default"])
def test_a_step_reading_what_an_earlier_one_made_past_ctx_gets_no_cause(
    twicerun, write_pipeline, default_table, kept
):
    """The earlier step's random rows reached the later one in every run, past
    containment; the bisect re-ran the later step alone, on whatever the last run of the
    earlier one had left, went quiet and called it PARALLEL_ORDER. One thread was never
    the question."""
    source, place = _handed_over(kept, default_table)
    path = write_pipeline(source)
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    build, use = steps
    assert (build["status"], use["status"]) == ("NO_DIVERGENCE_OBSERVED", "DIVERGENT")
    assert (use["cause"], use["bisect"]) == (None, None)
    assert use["notes"] == [
        f"its code names table {default_table} on {place}, which step 0 build makes there: "
        "that connection outlives each step, so what is made there reaches this step in "
        "every run past containment, and a difference here may come from there. Not "
        "bisected: re-executed alone at one thread, this step would read whatever the last "
        "execution before it left there, so its runs could not say why it differed (hand "
        "the rows over with ctx.write and ctx.read)"
    ]


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "default"])
def test_a_quiet_step_reading_what_an_earlier_one_made_past_ctx_is_told_so(
    twicerun, write_pipeline, default_table, kept
):
    """The same hand-off with rows that never change: the later step agreed with itself,
    and the report said nothing, though containment never reached what it read, no
    amplifier varied it, and `reproduce --step use` raised for want of the table."""
    source, place = _handed_over(kept, default_table)
    path = write_pipeline(source.replace("random()", "i / 100"))
    build, use = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    assert (build["status"], use["status"]) == ("NO_DIVERGENCE_OBSERVED",) * 2
    assert build["notes"] == []
    assert use["notes"] == [
        f"its code names table {default_table} on {place}, which step 0 build makes there: "
        "that connection outlives each step, so what is made there reaches this step past "
        "the artifacts: containment does not cover it, no amplifier varies it, and "
        "`twicerun reproduce --step use` re-executes this step without it, so its agreeing "
        "with itself says nothing about what it reads there (hand the rows over with "
        "ctx.write and ctx.read)"
    ]


def test_steps_sharing_a_kept_connection_for_tables_of_their_own_are_bisected(
    twicerun, write_pipeline
):
    """Each step stages in a table only it names: nothing passes between them there, so
    the step that differs keeps its bisect and its cause."""
    path = write_pipeline(
        """
        import duckdb

        CON = duckdb.connect()


        def first(ctx):
            CON.sql("CREATE OR REPLACE TABLE stage_a AS SELECT 1 AS one")
            ctx.write("a", CON.sql("SELECT one FROM stage_a").arrow())


        def second(ctx):
            CON.sql("CREATE OR REPLACE TABLE stage_b AS SELECT random() < 2 AS yes, random() AS r")
            ctx.write("b", CON.sql("SELECT r FROM stage_b").arrow())
        """
    )
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    assert (steps[1]["status"], steps[1]["cause"]) == ("DIVERGENT", "PERSISTS_SINGLE_THREADED")
    assert not any("outlives each step" in note for note in steps[1]["notes"])


@pytest.mark.parametrize("pipeline_logs", [False, True])
def test_a_ctx_artifact_sharing_a_name_with_a_table_on_a_kept_connection_keeps_the_bisect(
    twicerun, write_pipeline, pipeline_logs
):
    """The later step reads the artifact `orders` through ctx and only writes a line of its
    own to the kept connection, which also holds a table `orders` the earlier step made.
    The name in its code was taken for that table: not bisected, and a note saying it read
    it. DuckDB's query log says which queries ran on the connection; where the pipeline
    logs there itself, its log is left alone and the code is searched as before."""
    path = write_pipeline(
        f"""
        import itertools

        import duckdb

        CON = duckdb.connect()
        CON.execute("CREATE TABLE runlog (step VARCHAR)")
        if {pipeline_logs}:
            CON.execute("CALL enable_logging('QueryLog')")
        _calls = itertools.count()


        def make(ctx):
            ctx.write("orders", "SELECT range AS id FROM range(10)")
            CON.execute("CREATE OR REPLACE TABLE orders AS SELECT random() AS r")


        def by_threads(ctx):
            ctx.read("orders")
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("out", f"SELECT {{mark}} AS v, count(*) AS n FROM orders")
            CON.execute("INSERT INTO runlog VALUES ('by_threads')")
        """
    )
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    named = any("outlives each step" in note for note in steps[1]["notes"])
    if pipeline_logs:
        assert named and steps[1]["cause"] is None
    else:
        assert (steps[1]["status"], steps[1]["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
        assert not named


def test_an_audit_names_what_the_steps_made_on_the_default_connection(
    twicerun, write_pipeline, default_table
):
    """Its first run shares the default connection with the ordinary run before it, its
    second starts in a process of its own: that is why the two differ."""
    import duckdb

    make = f"CREATE TABLE IF NOT EXISTS {default_table} (id BIGINT, g BIGINT)"
    path = write_pipeline(MAKES_ON_THE_DEFAULT.format(make=make, table=default_table))
    document = twicerun("audit", path, "--json", "-").json()
    make_step, staged = document["steps"]
    assert staged["verdict"] == "not reproducible"
    assert staged["default_connection"] == [f"table {default_table}"]
    assert make_step["default_connection"] == []
    # Made before the pipeline was imported, it is the process's and not the steps'.
    assert twicerun("audit", path, "--json", "-").json()["steps"][1]["default_connection"] == []
    duckdb.sql(f"DROP TABLE {default_table}")
    text = twicerun("audit", path).out
    assert (
        f"    its code runs SQL on DuckDB's default connection (duckdb.sql() and the like), "
        f"which is the process's, and the steps have made table {default_table} there since "
        f"the pipeline was imported: the first run found it as the ordinary run before it "
        f"left it, and the second, in a process of its own, as the pipeline's import left "
        f"it; ctx.sql runs on the step's own connection, which starts empty every time\n"
    ) in text


def test_an_audit_names_what_the_steps_made_on_a_connection_the_pipeline_keeps(
    twicerun, write_pipeline
):
    """A later step reading a table an earlier one fills with random rows on the
    pipeline's own CON was not reproducible, with nothing said of where to look: each
    audit run found the table as its own process's earlier executions had left it."""
    path = write_pipeline(
        HANDED_OVER_PAST_CTX.format(keep="CON = duckdb.connect()", on="CON", table="side")
    )
    document = twicerun("audit", path, "--json", "-").json()
    build, use = document["steps"]
    assert use["verdict"] == "not reproducible"
    assert use["kept_connections"] == {"the connection the pipeline keeps as CON": ["table side"]}
    text = twicerun("audit", path).out
    assert (
        "    its code runs SQL on the connection the pipeline keeps as CON, which outlives the "
        "step, and the steps made table side there while the audit ran: each of its two runs, "
        "the second in a process of its own, found it as the executions before it in its own "
        "process left it; ctx.sql runs on the step's own connection, which starts empty every "
        "time\n"
    ) in text
    # The step that makes it repeated itself: no line for it.
    assert build["verdict"] == "deterministic"
    assert "keeps as CON" not in text.split("1 use")[0]


ATTACHES = """
def loads(ctx):
    ctx.sql("ATTACH {warehouse!r} AS wh")
    ctx.sql("CREATE TABLE IF NOT EXISTS wh.facts (id BIGINT)")
    ctx.sql("INSERT INTO wh.facts SELECT range FROM range(10)")
    ctx.write("loaded", "SELECT count(*) AS n FROM wh.facts")


def reads(ctx):
    ctx.sql("ATTACH {reference!r} AS ref (READ_ONLY)")
    ctx.write("looked_up", "SELECT count(*) AS n FROM ref.codes")
"""


def test_a_database_file_a_step_attaches_for_writing_is_named_beside_its_cause(
    twicerun, write_pipeline, tmp_path
):
    """Rows inserted into an attached file pile up run by run (and invocation by invocation),
    and the step differed at one thread: the report said only that the ATTACH read rows
    past ctx. A file attached READ_ONLY is not named."""
    import duckdb

    warehouse, reference = tmp_path / "wh.duckdb", tmp_path / "ref.duckdb"
    with duckdb.connect(str(reference)) as con:
        con.execute("CREATE TABLE codes AS SELECT range AS code FROM range(3)")
    path = write_pipeline(ATTACHES.format(warehouse=str(warehouse), reference=str(reference)))
    outcome = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-")
    loads, reads = outcome.json()["steps"]
    assert (loads["status"], loads["cause"]) == ("DIVERGENT", "PERSISTS_SINGLE_THREADED")
    assert loads["notes"][-1] == (
        f"attaches {warehouse} without READ_ONLY, and a database file outlives every run and "
        "every invocation: what one run writes there, the later ones read (rows inserted "
        "there pile up run by run); give rows to ctx.write, keep a step's own earlier output "
        "with ctx.state, or attach it READ_ONLY"
    )
    assert reads["status"] == "NO_DIVERGENCE_OBSERVED"
    assert not any(note.startswith("attaches") for note in reads["notes"])


def test_a_cache_in_a_database_file_a_quiet_step_attaches_for_writing_is_named(
    twicerun, write_pipeline, tmp_path
):
    """A table made there only when missing is computed once, by the first run that finds
    it missing (in this invocation or an earlier one), and read back by every run after:
    the step came out NO_DIVERGENCE_OBSERVED with only the note on its ATTACH reading rows
    past ctx."""
    warehouse = tmp_path / "cache.duckdb"
    path = write_pipeline(
        f"""
        def firsts(ctx):
            ctx.sql("ATTACH {str(warehouse)!r} AS c")
            ctx.sql("CREATE TABLE IF NOT EXISTS c.firsts AS "
                    "SELECT range % 5 AS k, max(range) AS v FROM range(100) GROUP BY 1")
            ctx.write("firsts", "SELECT * FROM c.firsts")
        """
    )
    (step,) = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"]
    assert step["status"] == "NO_DIVERGENCE_OBSERVED"
    assert step["notes"][-1] == (
        f"attaches {warehouse} without READ_ONLY, and a database file outlives every run and "
        "every invocation: if the step takes its answer from a table there that it makes "
        "only when missing (a cache), no run after the one that made it computed it, so the "
        "runs' agreeing, or any amplifier's, says nothing about its inputs; give rows to "
        "ctx.write, keep a step's own earlier output with ctx.state, or attach it READ_ONLY"
    )
