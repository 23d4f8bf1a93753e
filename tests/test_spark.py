"""The loop on Apache Spark (ENGINE = "spark"), in local mode.

Starting Spark costs seconds, so every test here shares one context, started once
by the `spark` fixture; twicerun uses a context already running in its process
and leaves it running. Each step still gets a session of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from twicerun.storage.spark_context import SESSION_SETTINGS


@pytest.fixture(scope="session", autouse=True)
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    # Loopback only: the tests never leave the machine.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers run the interpreter running the tests, not whichever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("twicerun-tests")
    # Spark's default warehouse is ./spark-warehouse, which would land in the checkout.
    builder = builder.config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
    for key, value in SESSION_SETTINGS.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


ISOLATION = """
ENGINE = "spark"


def leave_things_behind(ctx):
    ctx.sql("CREATE OR REPLACE TEMPORARY VIEW leftover AS SELECT 1 AS x")
    ctx.sql("SET spark.sql.ansi.enabled = false")
    ctx.sql("SET twicerun.test.marker = set-by-the-first-step")
    ctx.write("first", "SELECT 1 AS x")


def look_for_them(ctx):
    views = [t.name for t in ctx.spark.catalog.listTables() if t.isTemporary]
    marker = ctx.spark.conf.get("twicerun.test.marker", "absent")
    ctx.write(
        "seen",
        ctx.spark.createDataFrame(
            [(",".join(sorted(views)), marker, ctx.spark.conf.get("spark.sql.ansi.enabled"), ctx.threads,
              int(ctx.spark.conf.get("spark.sql.shuffle.partitions")))],
            "views STRING, marker STRING, ansi STRING, threads INT, partitions INT",
        ),
    )
"""


def test_each_step_gets_a_fresh_session(write_pipeline, twicerun, run_dir):
    outcome = twicerun(
        "run", write_pipeline(ISOLATION), "--runs", "2", "--threads", "3", "--json", "-"
    )
    assert outcome.code == 0, outcome.err
    (seen,) = run_dir.glob("*/loop/1/*look_for_them/seen.parquet")
    row = pq.read_table(seen).to_pylist()[0]
    # The first step's temporary view and settings did not reach the second step, which
    # runs at the parallelism the run asked for.
    assert row == {"views": "", "marker": "absent", "ansi": "true", "threads": 3, "partitions": 3}


CONTRACT = """
ENGINE = "spark"


def numbers(ctx):
    ctx.write("numbers", "SELECT id, id % 10 AS grp FROM range(1000);")


def grouped(ctx):
    frame = ctx.read("numbers")
    ctx.write("grouped", frame.groupBy("grp").count())


def ledger(ctx):
    ctx.read("grouped")
    ctx.state("ledger", "SELECT CAST(0 AS BIGINT) AS entries")
    ctx.write("ledger", "SELECT entries + 1 AS entries FROM ledger")
"""


def test_the_ctx_contract_holds_on_spark(write_pipeline, twicerun, run_dir):
    document = twicerun("run", write_pipeline(CONTRACT), "--runs", "2", "--json", "-").json()
    assert document["environment"]["engine"] == "spark"
    assert document["environment"]["spark_master"] == "local[2]"
    steps = {s["name"]: s for s in document["steps"]}
    assert steps["grouped"]["inputs"] == ["numbers"]
    assert steps["grouped"]["rows_read"] == 1000
    assert (steps["numbers"]["fired"], steps["grouped"]["fired"]) == (0, 0)
    # The state came from run 1's copy (1 entry), so run 2 wrote 2: the ledger moved.
    assert (steps["ledger"]["fired"], steps["ledger"]["compared"]) == (1, 1)
    # One Parquet file per artifact, whole, and no directory of parts left behind.
    run1 = next(run_dir.glob("*/loop/1"))
    assert pq.read_table(next(run1.glob("*grouped/grouped.parquet"))).num_rows == 10
    assert not [p for p in run1.rglob("*") if p.name.endswith(".spark-parts")]
    assert pq.read_table(next(run1.glob("*ledger/ledger.parquet"))).to_pylist() == [{"entries": 1}]
    # judge re-scores the saved Spark invocation without Spark: the same stamp and steps.
    invocation = next(run_dir.glob("*/result.json")).parent
    judged = twicerun("judge", str(invocation), "--policy", "reduction-order", "--json", "-")
    assert judged.json()["environment"] == document["environment"]
    assert [s["fired"] for s in judged.json()["steps"]] == [0, 0, 1]
    # The verbs over recorded runs re-execute steps on the engine the run used.
    outcome = twicerun("reproduce", str(run_dir), "--step", "grouped")
    assert outcome.code == 0, outcome.out
    assert "grouped  REPRODUCED" in outcome.out


PARTITIONED = """
ENGINE = "spark"


def events(ctx):
    ctx.write("events", "SELECT id, id % 20 AS grp FROM range(4000)")


def baskets(ctx):
    ctx.read("events")
    ctx.write("baskets", "SELECT grp, {ids} AS ids FROM events GROUP BY grp")
"""


def test_an_audit_of_a_spark_pipeline_names_spark_as_what_it_ran_on(write_pipeline, twicerun):
    # Its last line said "at threads=2 on DuckDB 2.0.1" of steps that ran on Spark.
    path = write_pipeline(CONTRACT)
    document = path.parent / "audit.json"
    outcome = twicerun("audit", path, "--threads", "2", "--step", "numbers", "--json", document)
    assert outcome.code == 0, outcome.err
    engine = json.loads(document.read_text())["engine"]
    assert engine.startswith("Spark ") and engine.endswith(
        f"at partitions=2, compared by DuckDB {duckdb.__version__}"
    )
    last = outcome.out.splitlines()[-1]
    assert (
        f"(1 step audited, two runs each in one Python process (one string hash seed), "
        f"on {engine}, in "
    ) in last
    assert "threads=" not in last


def test_a_partition_dependent_step_is_caught_by_changing_the_partitions(write_pipeline, twicerun):
    broken = write_pipeline(PARTITIONED.format(ids="collect_list(id)"), "broken.py")
    # Only the partition counts vary here: the input amplifiers' Spark runs are other
    # tests' subject, and each costs seconds (--without, on Spark too).
    inputs = ["row-multiplication", "tie-collapse", "arrival-order", "file-order"]
    without = [arg for name in inputs for arg in ("--without", name)]
    outcome = twicerun("run", broken, "--runs", "3", "--amplify", *without, "--json", "-")
    step = {s["name"]: s for s in outcome.json()["steps"]}["baskets"]
    # Local mode holds one partitioning still, so the loop sees nothing; other partition
    # counts change the lists.
    assert (step["fired"], step["status"]) == (0, "STABLE_ON_THIS_INPUT")
    fired = {a["kind"]: a["fired"] for a in step["amplifiers"]}
    assert list(fired) == ["thread count"]
    assert fired["thread count"] > 0
    threads = next(a for a in step["amplifiers"] if a["kind"] == "thread count")
    assert threads["detail"].startswith("partitions 4 in run 1, then 2 more in each later run")
    assert threads["classes"] == ["ROW_MISSING", "ROW_EXTRA"]
    # Different at other partition counts, the same at one task: the bisect names it.
    assert (step["cause"], step["bisect"]["fired"]) == ("PARALLEL_ORDER", 0)
    assert outcome.code == 4

    fixed = write_pipeline(PARTITIONED.format(ids="array_sort(collect_list(id))"), "fixed.py")
    outcome = twicerun("run", fixed, "--runs", "3", "--amplify", "--json", "-")
    assert outcome.code == 0, outcome.out


SAMPLED = """
ENGINE = "spark"


def events(ctx):
    ctx.write("events", "SELECT id FROM range(2000)")


def sampled(ctx):
    ctx.write("sampled", ctx.read("events").sample(fraction=0.1))
"""


def test_a_draw_without_a_seed_persists_at_one_task(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(SAMPLED), "--runs", "3")
    assert outcome.code == 1
    assert (
        "1 sampled  2 of 2  DIVERGENT  ROW_MISSING ROW_EXTRA  cause PERSISTS_SINGLE_THREADED"
        in outcome.out
    )
    assert "at one task (partitions=1) on run 1's inputs" in outcome.out
    assert "engine     Spark " in outcome.out


def test_spark_sql_naming_an_artifact_never_read_says_to_read_it(write_pipeline, twicerun):
    path = write_pipeline(
        'ENGINE = "spark"\n\n\n'
        "def first(ctx):\n"
        '    ctx.write("upstream", "SELECT 1 AS v")\n\n\n'
        "def second(ctx):\n"
        '    ctx.write("y", "SELECT v FROM Upstream")\n'
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert "TABLE_OR_VIEW_NOT_FOUND" in outcome.err
    assert (
        'twicerun: upstream is an artifact of step 0 first; call ctx.read("upstream") in this '
        "step before its SQL uses it"
    ) in outcome.err.splitlines()


def test_the_gate_decides_a_spark_pipeline_like_any_other(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    Path("pipelines").mkdir()
    steady = 'ENGINE = "spark"\n\n\ndef steady(ctx):\n    ctx.write("steady", "SELECT 1 AS v")\n'
    Path("pipelines/p.py").write_text(steady)
    fast = ["--trials", "5", "--no-amplify", "--runs", "3"]
    outcome = twicerun("baseline", "update", "pipelines/p.py", "--output", "baseline.json", *fast)
    assert outcome.code == 0, outcome.err
    assert json.loads(Path("baseline.json").read_text())["settings"]["engine"] == "spark"

    Path("pipelines/p.py").write_text(steady.replace('"SELECT 1 AS v"', '"SELECT rand() AS v"'))
    compare = ["baseline", "compare", "--pipelines", "pipelines/p.py", "--baseline"]
    outcome = twicerun(
        *compare, "baseline.json", "--no-amplify", "--runs", "3", "--json", "g.json",
        "--format", "text",
    )  # fmt: skip
    assert outcome.code == 1, outcome.out
    (decision,) = json.loads(Path("g.json").read_text())["decisions"]
    assert decision["verdict"] == "new divergence"
    # The summary's last line names what measured it; it said "DuckDB ... at threads=".
    stamp = outcome.out.rstrip().splitlines()[-1]
    assert ", Spark " in stamp and " at partitions=" in stamp and "threads=" not in stamp


def test_a_spark_sql_error_is_reported_once_not_also_as_pyspark_s_json_log(
    write_pipeline, twicerun
):
    # PySpark logged each SQL error it converted as a line of JSON with the JVM's whole
    # stack trace on stderr, above twicerun's own one-sentence report of the same error.
    import io
    import logging

    from pyspark.logger import PySparkLogger

    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    logger.setLevel(logging.WARNING)  # PySpark's own level, whatever an earlier test left
    logger.addHandler(handler)
    try:
        path = write_pipeline(
            'ENGINE = "spark"\n\n\ndef broken(ctx):\n'
            '    ctx.write("x", "SELECT missing_column FROM range(3)")\n'
        )
        outcome = twicerun("run", path, "--runs", "2")
    finally:
        logger.removeHandler(handler)
    assert outcome.code == 3
    assert "UNRESOLVED_COLUMN" in outcome.err
    assert logged.getvalue() == ""


def test_a_spark_sql_error_names_the_line_of_the_steps_own_string(
    write_pipeline, twicerun, run_dir
):
    """Spark counted from the query with its first line break trimmed off, so the column
    a query in triple quotes got wrong on its line 3 was reported at line 2; and the
    report went on with Spark's plan of the query, in which the artifact it read is a
    tree of twicerun's own columns (`__twicerun_partition_key`)."""
    path = write_pipeline(
        'ENGINE = "spark"\n\n\ndef src(ctx):\n    ctx.write("t", "SELECT 1 AS id")\n\n\n'
        'def broken(ctx):\n    ctx.read("t")\n'
        '    ctx.write("x", "\\nSELECT id,\\n       idd + 1 AS y\\nFROM t")\n'
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    first = outcome.err.splitlines()[0]
    assert "UNRESOLVED_COLUMN" in first and first.endswith(
        "line 3 pos 7; (Spark's plan of the query is in the step's receipt.json)"
    )
    assert "__twicerun" not in outcome.err and "+- " not in outcome.err
    (receipt,) = run_dir.glob("*/loop/1/01-broken/receipt.json")
    assert "__twicerun_partition_key" in json.loads(receipt.read_text())["error"]


def test_diff_of_a_duckdb_run_and_a_spark_run_names_the_engine_as_what_differed(
    write_pipeline, twicerun
):
    # The same rows from both engines were "same" with nothing said of how they were made.
    # Its version was not in the manifest, and DuckDB's threads were set against Spark's
    # partitions as if they were one setting; between two Spark runs, partitions were
    # called threads.
    import pyspark

    path = write_pipeline('def one(ctx):\n    ctx.write("one", "SELECT 1 AS v")\n')
    runs = []
    for engine, threads in (("duckdb", "2"), ("spark", "3"), ("spark", "2")):
        outcome = twicerun(
            "run", path, "--runs", "2", "--engine", engine, "--threads", threads,
            "--keep", "0", "--json", "-",
        )  # fmt: skip
        assert outcome.code == 0, outcome.err
        runs.append(outcome.json()["artifacts"])  # the invocation's own directory
    out = twicerun("diff", runs[0], runs[1]).out.splitlines()
    assert out[1].split() == ["0", "one", "same"]
    assert out[2:] == [
        f"       produced differently: engine (DuckDB against Spark {pyspark.__version__})"
    ]
    out = twicerun("diff", runs[1], runs[2]).out.splitlines()
    assert out[2:] == ["       produced differently: partitions (3 against 2)"]


def test_a_spark_that_does_not_start_is_one_sentence_and_exit_2(
    write_pipeline, twicerun, monkeypatch
):
    # A master that is down ended in "internal error" and a Py4J traceback, after about a
    # minute of Spark retrying. Here the start fails at once, as Py4J words it, and no
    # context of the suite's is touched: twicerun is made to start its own.
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    def down(_builder):
        raise RuntimeError(
            "An error occurred while calling None.org.apache.spark.sql.classic.SparkSession.\n"
            ": java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n"
            "This stopped SparkContext was created at:"
        )

    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", down)
    master = "spark://127.0.0.1:1"
    outcome = twicerun("run", write_pipeline(CONTRACT), "--runs", "2", "--spark-master", master)
    assert outcome.code == 2
    assert outcome.err.splitlines()[0] == (
        f"twicerun: Spark did not start on {master} (RuntimeError: java.lang.IllegalStateException: "
        "Cannot call methods on a stopped SparkContext.); check that the master is running and "
        "reachable from this machine, or leave out --spark-master to run in local mode"
    )


def test_a_spark_connect_server_out_of_reach_is_one_sentence_and_exit_2(write_pipeline, tmp_path):
    # Nothing listens on port 1. Without Connect's client packages (pandas and grpc, which the
    # `spark` extra does not bring) the sentence says how to install them. In a process of
    # its own: PySpark's Connect client exits the process when __main__ looks like a doctest
    # runner's, which an xdist worker's does.
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", "run", str(write_pipeline(CONTRACT)), "--runs", "2",
         "--spark-master", "sc://127.0.0.1:1", "--run-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("twicerun: Spark did not start on sc://127.0.0.1:1"), first
    if "PACKAGE_NOT_INSTALLED" in first:
        assert first.endswith("needs pyspark's connect extra, pip install 'pyspark[connect]'")
    assert "Traceback" not in done.stderr


def test_spark_exiting_the_process_while_it_starts_is_exit_2_never_0(
    write_pipeline, twicerun, monkeypatch
):
    # PySpark's Connect client calls sys.exit(0) when __main__ looks like a doctest runner's
    # (no __spec__, no __file__) and its packages are missing: `python -c` started twicerun
    # that way ended with status 0 and nothing measured.
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "__spec__", None, raising=False)
    monkeypatch.delattr(main, "__file__", raising=False)
    outcome = twicerun(
        "run", write_pipeline(CONTRACT), "--runs", "2", "--spark-master", "sc://127.0.0.1:1"
    )
    assert outcome.code == 2
    said = [line for line in outcome.err.splitlines() if line.startswith("twicerun: Spark")]
    assert said and said[0].startswith("twicerun: Spark did not start on sc://127.0.0.1:1")


def test_a_missing_java_or_a_master_for_duckdb_is_refused_before_anything_runs(
    write_pipeline, twicerun, tmp_path, monkeypatch, run_dir
):
    spark_pipeline = write_pipeline(SAMPLED, "s.py")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    outcome = twicerun("run", spark_pipeline)
    assert outcome.code == 2
    assert "Spark needs Java 17 or newer and this machine has no java on PATH" in outcome.err
    monkeypatch.undo()

    duckdb_pipeline = write_pipeline('def a(ctx):\n    ctx.write("a", "SELECT 1 AS x")\n', "d.py")
    outcome = twicerun("run", duckdb_pipeline, "--spark-master", "spark://example:7077")
    assert outcome.code == 2
    assert "this pipeline runs on DuckDB, which has no master" in outcome.err
    assert not run_dir.exists()


def test_what_a_cluster_run_did_not_vary_is_listed():
    from twicerun.runner.scoring import engine_not_varied

    assert engine_not_varied("duckdb", None) == []
    assert engine_not_varied("spark", "local[2]") == ["Spark version and settings"]
    on_cluster = engine_not_varied("spark", "spark://head:7077")
    assert on_cluster[0] == "Spark version and settings"
    assert on_cluster[1].startswith("the cluster at spark://head:7077: its executors")
    assert "only shuffle partitions and input partitioning were varied" in on_cluster[1]


def test_a_spark_run_does_not_list_duckdbs_version_among_what_it_held_fixed():
    # It did: DuckDB digests and compares a Spark step's output, but computes none of it.
    from twicerun.result import Environment
    from twicerun.runner.scoring import not_varied

    machine = {"duckdb": "2.0.1", "threads": 2, "platform": "Linux", "python": "3.11"}
    on_spark = not_varied([], True, Environment(**machine, twicerun="0", engine="spark"))
    on_duckdb = not_varied([], True, Environment(**machine, twicerun="0"))
    assert "DuckDB version" not in on_spark
    assert "Spark version and settings" in on_spark
    assert on_duckdb[0] == "DuckDB version"


def test_a_context_twicerun_starts_draws_no_progress_bar_over_its_own_lines():
    # Spark's console progress bar redraws itself on stderr, where twicerun's progress
    # lines go; it can only be turned off before the context starts, in the builder.
    from twicerun.storage.spark_context import SparkEngine

    engine = SparkEngine(threads=2)
    try:
        assert engine._builder._options.get("spark.ui.showConsoleProgress") == "false"
        assert engine._builder._options.get("spark.ui.enabled") == "false"
    finally:
        engine.shutdown()  # leaves the suite's context, which it did not start, running


def test_a_source_glob_reads_the_same_files_on_spark_as_on_duckdb(
    write_pipeline, twicerun, tmp_path
):
    """Spark's glob was Python's: it read `**` as one directory level and listed a directory
    named like a file, which Spark then read as a dataset. DuckDB's glob() does neither, and
    the contract says a source is read as DuckDB reads the list. Each file found is then read
    by its name, which both engines took as a glob again (p[1] read p1, q{1,2} read q1)."""
    data = tmp_path / "landing"
    (data / "2024").mkdir(parents=True)
    (data / "parts.parquet").mkdir()
    con = duckdb.connect()
    for path, first in [
        (data / "a.parquet", 0),
        (data / "2024" / "b.parquet", 20),  # one level down: `**` reaches it
        (data / "parts.parquet" / "c.parquet", 30),  # inside a directory named like a file
        (data / "p[1].parquet", 40),  # named like a glob that matches p1.parquet
        (data / "p1.parquet", 50),
        (data / "q{1,2}.parquet", 60),  # a Hadoop glob, so Spark read q1.parquet
        (data / "q1.parquet", 70),
    ]:
        con.execute(f"COPY (SELECT range + {first} AS id FROM range(3)) TO '{path}'")
    body = f"""
        def landed(ctx):
            ctx.source("events", {str(data / "**" / "*.parquet")!r})
            ctx.write("ids", "SELECT id FROM events ORDER BY id")
        """
    read = {}
    for engine in ("duckdb", "spark"):
        path = write_pipeline(f'ENGINE = "{engine}"\n' + textwrap.dedent(body), f"{engine}.py")
        outcome = twicerun("run", path, "--runs", "2", "--json", "-", "--keep", "0")
        assert outcome.code == 0, outcome.err
        (source,) = outcome.json()["steps"][0]["sources"]
        ids = Path(outcome.json()["artifacts"]) / "loop" / "1" / "00-landed" / "ids.parquet"
        rows = con.execute(f"SELECT id FROM read_parquet('{ids}') ORDER BY id").fetchall()
        read[engine] = (sorted(f["path"] for f in source["files"]), source["rows"], rows)
    assert read["spark"] == read["duckdb"]
    files = sorted(str(p) for p in data.rglob("*.parquet") if p.is_file())
    every = sorted((first + i,) for first in (0, 20, 30, 40, 50, 60, 70) for i in range(3))
    assert read["duckdb"] == (files, 21, every)

    # A file named like a hidden or metadata file: DuckDB reads it, Spark drops it from a list
    # without a word, so a receipt would name a file whose rows never arrived. Refused.
    con.execute(f"COPY (SELECT 10 AS id) TO '{data / '.late.parquet'}'")
    outcome = twicerun(
        "run", write_pipeline('ENGINE = "spark"\n' + textwrap.dedent(body)), "--runs", "2"
    )
    assert outcome.code == 2, outcome.err
    assert "Spark does not read a file whose name starts with '.' or '_'" in outcome.err
    assert ".late.parquet would be left out of the rows; rename it" in outcome.err


UDFS = """
ENGINE = "spark"
from pyspark.sql.functions import udf
from pyspark.sql.types import LongType

from helpers_for_udfs import double


def triple(x):
    return x * 3


def numbers(ctx):
    ctx.write("numbers", "SELECT id FROM range(20)")


def through_udfs(ctx):
    # One defined in the pipeline, one in the helper beside it, and one from a helper the
    # step imports in its own body, for the first time in the invocation.
    from imported_in_the_step import negate

    df = ctx.read("numbers")
    tripled = udf(triple, LongType())(df.id).alias("tripled")
    doubled = udf(double, LongType())(df.id).alias("doubled")
    ctx.write("out", df.select(tripled, doubled, udf(negate, LongType())(df.id).alias("negated")))
"""


# pyspark says, once per UDF, that it falls back from Arrow without pandas; so it should.
@pytest.mark.filterwarnings("ignore:Arrow optimization failed:RuntimeWarning")
def test_a_python_udf_from_the_pipeline_or_its_helper_runs_on_the_workers(
    write_pipeline, twicerun, tmp_path, run_dir
):
    """The workers are other Python processes: they could not import the pipeline, which
    twicerun imports under a name of its own, nor a helper beside it unless twicerun ran
    from its directory, so the step crashed with ModuleNotFoundError on the workers; a
    helper the step imported in its body still did, until it was registered on import."""
    (tmp_path / "helpers_for_udfs.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "imported_in_the_step.py").write_text("def negate(x):\n    return -x\n")
    path = write_pipeline(UDFS)
    assert Path.cwd() != tmp_path
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert outcome.code == 0, outcome.err[-2000:]
    (written,) = run_dir.glob("*/loop/1/*through_udfs/out.parquet")
    rows = sorted(pq.read_table(written).to_pylist(), key=lambda r: r["tripled"])
    assert rows == [{"tripled": 3 * i, "doubled": 2 * i, "negated": -i} for i in range(20)]


SOURCED_ON_SPARK = """
import os
ENGINE = "spark"


def first_per_key(ctx):
    ctx.source("raw", os.environ["ONE_FILE"], header="true", inferSchema="true")
    ctx.write("firsts", "SELECT k, first(v) AS v FROM raw GROUP BY k")
"""


def test_a_source_is_stressed_on_spark_from_a_copy_spark_reads(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    """The input amplifiers declined every step that read only sources on Spark. The copy
    they stress is now read by Spark with the step's own options (a header, inferred types),
    so it holds the rows the step saw; arrival order then moves `first` on one file."""
    data = tmp_path / "one.csv"
    data.write_text("k,v\n" + "".join(f"{i % 5},{i}\n" for i in range(200)))
    monkeypatch.setenv("ONE_FILE", str(data))
    outcome = twicerun(
        "run", write_pipeline(SOURCED_ON_SPARK), "--runs", "3", "--amplify", "--json", "-",
        # Arrival order is the subject; the others would add a dozen Spark executions.
        "--without", "thread-count", "--without", "row-multiplication",
        "--without", "tie-collapse",
    )  # fmt: skip
    (step,) = outcome.json()["steps"]
    stressed = {a["kind"]: a for a in step["amplifiers"]}
    assert stressed["arrival order"]["declined"] is None, stressed["arrival order"]
    assert "source raw" in stressed["arrival order"]["detail"]
    assert stressed["arrival order"]["fired"] > 0
    assert step["status"] == "STABLE_ON_THIS_INPUT"


LATEST_BY_FILE_ON_SPARK = """
import os
from pyspark.sql import functions as F
from pyspark.sql.window import Window

ENGINE = "spark"


def latest_copy(ctx):
    raw = ctx.source("raw", os.environ["FEED"] + "/*.csv", header="true", inferSchema="true")
    latest = Window.partitionBy("event_id").orderBy(F.col("file").desc())
    rows = raw.withColumn("file", F.input_file_name()).withColumn("n", F.row_number().over(latest))
    ctx.write("events", rows.where("n = 1").drop("n", "file"))
"""


def test_a_source_read_for_each_row_s_file_is_not_stressed_as_one_file(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    """An event repeated in the next file, the copy from the latest file kept by ordering on
    input_file_name(): correct, and STABLE_ON_THIS_INPUT, since the stressed copy of the
    source is one file and every row then came from it. Such a source is now left
    unstressed, and the report says why."""
    feed = tmp_path / "feed"
    feed.mkdir()
    for f in range(3):
        rows = "".join(
            f"{(f - 1) * 100 + n if f and n % 10 == 0 else f * 100 + n},{f}\n" for n in range(100)
        )
        (feed / f"part-{f}.csv").write_text("event_id,batch\n" + rows)
    monkeypatch.setenv("FEED", str(feed))
    outcome = twicerun(
        "run", write_pipeline(LATEST_BY_FILE_ON_SPARK), "--runs", "2", "--amplify", "--json", "-",
        "--without", "thread-count", "--without", "file-order",
    )  # fmt: skip
    (step,) = outcome.json()["steps"]
    assert step["status"] == "NO_DIVERGENCE_OBSERVED", step
    stressed = {a["kind"]: a for a in step["amplifiers"]}
    assert "(input_file_name())" in stressed["arrival order"]["declined"]
    assert (
        "its source raw is read for the file each row came from"
        in (stressed["tie collapse"]["declined"])
    )


def test_what_in_a_plan_names_each_row_s_file_is_noted(spark, tmp_path):
    from pyspark.sql import functions as F

    ctx = _bare_context(spark, tmp_path)
    (tmp_path / "a.csv").write_text("k,v\n1,2\n")
    frame = spark.read.option("header", "true").csv(str(tmp_path / "a.csv"))
    ctx.write("plain", frame)
    assert ctx.output.row_files == []
    ctx.write("paths", frame.select("k", "_metadata.file_path"))
    ctx.write("names", frame.select("k", F.input_file_name().alias("file")))
    assert ctx.output.row_files == ["_metadata", "input_file_name()"]


def test_a_step_timeout_cancels_a_spark_job(write_pipeline, twicerun, run_dir):
    """--step-timeout was refused on Spark, since stopping the driver's call leaves the
    job running; the step's jobs are now cancelled, and the session goes on working."""
    import time

    path = write_pipeline(
        """
        ENGINE = "spark"


        def hangs(ctx):
            # Hours on two cores unless cancelled.
            ctx.write("n", "SELECT sum(id * 7 % 13) AS s FROM range(100000000000000)")
        """
    )
    started = time.monotonic()
    outcome = twicerun("run", path, "--runs", "2", "--step-timeout", "3")
    assert outcome.code == 3, outcome.err
    assert "step 0 hangs was stopped in run 1" in outcome.err
    assert "it ran longer than --step-timeout 3s" in outcome.err
    # Cancelled, not waited on until the signal after the grace.
    assert time.monotonic() - started < 3 + 8
    quick = write_pipeline(
        'ENGINE = "spark"\n\n\ndef a(ctx):\n    ctx.write("x", "SELECT 1 AS v")\n', "quick.py"
    )
    assert twicerun("run", quick, "--runs", "2", "--step-timeout", "60").code == 0


def test_audit_takes_the_engine_and_the_master_as_run_does(write_pipeline, twicerun):
    """Only `run` took --engine and --spark-master: a DuckDB pipeline could not be audited on
    Spark, nor a Spark one on a cluster."""
    path = write_pipeline('def a(ctx):\n    ctx.write("a", "SELECT id FROM range(10)")\n')
    document = path.parent / "audit.json"
    outcome = twicerun("audit", path, "--engine", "spark", "--threads", "2", "--json", document)
    assert outcome.code == 0, outcome.err
    assert json.loads(document.read_text())["engine"].startswith("Spark ")
    refused = twicerun("audit", path, "--spark-master", "spark://example:7077")
    assert refused.code == 2
    assert "this pipeline runs on DuckDB, which has no master" in refused.err


def test_reproduce_goes_back_to_the_cluster_a_run_recorded_or_where_it_is_told(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    """reproduce re-executed a cluster's run in local mode without a word; it now goes to the
    master the run recorded, says so when that is out of reach, and --spark-master sends it
    elsewhere."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    assert twicerun("run", write_pipeline(CONTRACT), "--runs", "2").code == 1
    (invocation,) = [p.parent for p in run_dir.glob("*/invocation.json")]
    manifest = invocation / "invocation.json"
    recorded = json.loads(manifest.read_text())
    assert recorded["spark_master"] == "local[2]"
    manifest.write_text(json.dumps({**recorded, "spark_master": "spark://127.0.0.1:1"}))

    started_on: list[str] = []

    def down(builder):
        started_on.append(builder._options.get("spark.master"))
        raise RuntimeError("An error occurred while calling x.\n: java.io.IOException: refused")

    with monkeypatch.context() as patched:
        patched.setattr(SparkContext, "_active_spark_context", None)
        patched.setattr(SparkSession.Builder, "getOrCreate", down)
        outcome = twicerun("reproduce", str(invocation), "--step", "grouped")
    assert outcome.code == 3, outcome.out
    assert started_on == ["spark://127.0.0.1:1"]
    assert outcome.err.splitlines()[0] == (
        "twicerun: refused: Spark did not start on spark://127.0.0.1:1 (RuntimeError: "
        "java.io.IOException: "
        f"refused), the cluster {invocation} ran on; check that it is running and reachable "
        "from this machine, or pass --spark-master local[2] to re-execute its steps here"
    )
    here = twicerun("reproduce", str(invocation), "--step", "grouped", "--spark-master", "local[2]")
    assert here.code == 0, here.out + here.err
    assert "grouped  REPRODUCED" in here.out


ON_THE_WORKERS = """
ENGINE = "spark"

from pyspark.sql import functions as F


def make(ctx):
    ctx.write("a", "SELECT id FROM range(10)")


def plus_one(ctx):
    ctx.write("b", ctx.read("a").select(F.udf(lambda x: x + 1, "long")("id").alias("y")))


def on_the_workers(ctx):
    import sys

    rdd = ctx.spark.sparkContext.parallelize([0], 1)
    (version,) = rdd.map(lambda _: "%d.%d" % sys.version_info[:2]).collect()
    ctx.write("where", ctx.spark.createDataFrame([(version,)], "version STRING"))
"""


def test_a_context_twicerun_starts_runs_its_workers_on_its_own_python_from_anywhere(tmp_path):
    """Two ways Spark's Python workers went wrong in a context twicerun starts; one process
    of its own for both, since the context the other tests share was not started by
    twicerun, and a JVM takes seconds to start.

    - Spark starts workers with whatever `python3` is first on PATH unless told otherwise;
      from a venv that was not activated that is another interpreter, and a step that ran
      Python on the workers failed with PYTHON_VERSION_MISMATCH. Here the python3 on PATH
      cannot run at all.
    - A worker starts as `python -m pyspark.daemon` in the working directory, which -m puts
      first on the worker's path: from a project whose root holds a `types.py` (or
      `random.py`, `copy.py`...) every step with a Python UDF failed before running, on a
      pipeline that ran anywhere else. Here the working directory holds one."""
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "python3").write_text(
        "#!/bin/sh\necho 'not the python twicerun runs on' >&2\nexit 1\n"
    )
    (decoy / "python3").chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    (project / "types.py").write_text("raise SystemExit('imported from the project')\n")
    (project / "p.py").write_text(ON_THE_WORKERS)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env["PATH"] = f"{decoy}{os.pathsep}{env['PATH']}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("twicerun")), "run", "p.py", "--runs", "2",
         "--no-amplify", "--threads", "1", "--run-dir", str(tmp_path / "runs")],
        env=env, capture_output=True, text=True, timeout=300, cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "0 of 3 steps diverged" in done.stdout
    # The JVM twicerun starts logs errors only from its first line: Spark's default profile
    # printed half a dozen WARN lines, and how to change the level, above the report.
    noise = [
        line
        for line in done.stderr.splitlines()
        if " WARN " in line or "log4j" in line or "log level" in line
    ]
    assert noise == []
    (where,) = (tmp_path / "runs").glob("*/loop/1/*on_the_workers/where.parquet")
    assert pq.read_table(where).to_pylist() == [{"version": "{}.{}".format(*sys.version_info[:2])}]


def _bare_context(spark, tmp_path):
    """A Spark ctx for step 1 `step`, reading nothing, writing under tmp_path/out."""
    from twicerun.storage.spark_context import SparkStepContext

    return SparkStepContext(
        session=spark,
        threads=2,
        step_index=1,
        step_name="step",
        out_dir=tmp_path / "out",
        visible={},
        state_source=lambda name: None,
        owners={},
    )


def test_a_pandas_or_arrow_frame_written_on_spark_is_refused_with_how_to_make_it_a_spark_one(
    spark, tmp_path
):
    """It read "must be ... a DataFrame, got DataFrame" to a step holding pandas' DataFrame."""
    from twicerun.errors import ContractError

    ctx = _bare_context(spark, tmp_path)
    with pytest.raises(ContractError) as refused:
        ctx.write("t", pa.table({"a": [1]}))
    assert str(refused.value) == (
        "ctx.write('t', data) in step 1 step: data must be a Spark SQL query string or a Spark "
        "DataFrame, got pyarrow.Table; make it a Spark one first, ctx.spark.createDataFrame(df)"
    )
    with pytest.raises(ContractError) as refused:
        ctx.write("t", {"a": [1]})
    assert str(refused.value).endswith("or a Spark DataFrame, got dict")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_spark_sql_that_draws_at_random_is_noted_for_the_receipt(spark, tmp_path):
    """The DuckDB ctx noted such queries for the loop's note and the verdicts; the Spark
    ctx noted none, so a Spark step ordering by rand() got the bare sentence."""
    ctx = _bare_context(spark, tmp_path)
    ctx.sql("SELECT 1 AS one")
    ctx.sql("SELECT rand() AS r")
    ctx.write("t", "SELECT id FROM range(10) ORDER BY rand() LIMIT 3")
    assert ctx.output.sql_draws == [
        "SELECT rand() AS r",
        "SELECT id FROM range(10) ORDER BY rand() LIMIT 3",
    ]


def test_a_first_call_apart_by_a_module_value_gets_no_cause_in_spark_words(
    write_pipeline, twicerun
):
    """The bisect's withheld cause names Spark's unit, one task, as the rest of the report
    does; it said "one thread"."""
    path = write_pipeline(
        """
        ENGINE = "spark"
        CALLS = {"n": 0}


        def first_differs(ctx):
            CALLS["n"] += 1
            ctx.write("out", f"SELECT {1 if CALLS['n'] == 1 else 2} AS v")
        """
    )
    outcome = twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-")
    (step,) = outcome.json()["steps"]
    assert step["cause"] is None
    assert step["bisect"]["error"].endswith("so going quiet here says nothing of one task")
