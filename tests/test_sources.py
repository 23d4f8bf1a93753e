"""ctx.source, the file-order amplifier, and the TLC backfill on generated partitions."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

from twicerun.runner.amplify.base import Applied, Declined
from twicerun.runner.amplify.file_order import orders, other_order, permutation


def _script(name: str):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return module


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tlc")
    _script("tlc_partitions").generate(directory, rows=200)
    return directory


# The amplifier, as a pure function ----------------------------------------------------


@given(
    st.lists(st.text(min_size=1, max_size=5), min_size=2, max_size=8, unique=True),
    st.integers(1, 20),
)
def test_another_order_is_the_same_files_in_a_different_order(files, variant):
    reordered, outcome = other_order(files, variant)
    assert isinstance(outcome, Applied)
    assert sorted(reordered) == sorted(files) and reordered != files
    assert reordered == [files[i] for i in permutation(len(files), variant)]


def test_the_first_other_order_is_reversed_then_rotations_in_turn():
    assert orders(3) == [[2, 1, 0], [1, 2, 0], [2, 0, 1]]
    assert orders(2) == [[1, 0]]  # reversed and rotated are one order: tried once
    assert other_order(["a", "b", "c"], 1) == (["c", "b", "a"], Applied("reversed"))


@pytest.mark.parametrize("files", [[], ["only.parquet"]])
def test_a_single_file_source_is_declined_with_the_reason(files):
    reordered, outcome = other_order(files, 1)
    assert reordered is None and isinstance(outcome, Declined)
    assert "no other order" in outcome.reason


# ctx.source ---------------------------------------------------------------------------

SOURCED = """
import os

FILES = os.environ["TLC_FILES"].split(",")


def trips(ctx):
    ctx.source("raw", FILES, union_by_name=True)
    ctx.write("per_month", "SELECT strftime(lpep_pickup_datetime, '%Y-%m') AS month, count(*) AS n FROM raw GROUP BY ALL ORDER BY ALL")
"""


def test_a_sources_files_sizes_and_digests_are_in_the_receipt_and_the_result(
    twicerun, write_pipeline, partitions, monkeypatch, run_dir
):
    files = sorted(str(p) for p in partitions.glob("*.parquet"))
    monkeypatch.setenv("TLC_FILES", ",".join(files))
    path = write_pipeline(SOURCED)
    first = twicerun("run", path, "--runs", "2", "--keep", "0", "--json", "-")
    assert first.code == 0, first.err
    step = first.json()["steps"][0]
    (source,) = step["sources"]
    assert [f["path"] for f in source["files"]] == files
    assert all(f["size"] > 0 and len(f["digest"]) == 64 for f in source["files"])
    assert source["rows"] == 600 and step["rows_read"] == 600
    receipt = json.loads(
        next(p for p in run_dir.iterdir() if p.is_dir())
        .joinpath("loop", "1", "00-trips", "receipt.json")
        .read_text()
    )
    assert receipt["sources"][0]["files"] == source["files"]
    assert receipt["sources"][0]["options"] == {"union_by_name": True}

    # One input file changes between two invocations: the Result shows it, and so does diff.
    monthly = _script("tlc_partitions")
    monthly.generate(partitions, rows=201)
    second = twicerun("run", path, "--runs", "2", "--keep", "0", "--json", "-")
    changed = second.json()["steps"][0]["sources"][0]["files"]
    assert [f["digest"] for f in changed] != [f["digest"] for f in source["files"]]
    a, b = (first.json()["artifacts"], second.json()["artifacts"])
    outcome = twicerun("diff", a, b, "--json", "-")
    (verdict,) = outcome.json()["steps"]
    assert verdict["verdict"] == "FIRST DIFFERENCE"
    assert verdict["inputs"].startswith("differ: source raw")
    monthly.generate(partitions, rows=200)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            'ctx.source("raw", ["nowhere.parquet"])',
            "nowhere.parquet does not exist or is not a file (a relative path is read from "
            "the working directory, ",
        ),
        ('ctx.source("raw", [])', "an empty list"),
        (
            'ctx.source("raw", os.path.dirname(FILES[0]))',
            "is a directory; name its files, or a glob such as '",
        ),
        (
            'ctx.source("raw", "*.nothing.parquet")',
            "the glob '*.nothing.parquet' matches no file (a relative path is read from the "
            "working directory, ",
        ),
        ('ctx.source("raw", [__file__])', "neither Parquet nor CSV"),
        ('ctx.source("raw", FILES, union_by_name=object())', "is not a bool, number, string"),
        ('ctx.source("1raw", FILES)', "a source name is an identifier"),
        (
            'ctx.source("raw", "s3://landing/*.parquet")',
            "s3://landing/*.parquet is a URL, and ctx.source reads local files",
        ),
        (
            'ctx.source("raw", [*FILES, "https://example.com/late.parquet"])',
            "https://example.com/late.parquet is a URL, and ctx.source reads local files",
        ),
        ('ctx.source("raw", 5)', "files is a list of paths (or one path, or a glob), got int"),
        (
            'ctx.source("raw", "file:///landing/a.parquet")',
            "file:///landing/a.parquet is a file: URL; give the path itself ('/landing/a.parquet')",
        ),
    ],
    ids=[
        "missing",
        "empty",
        "directory",
        "glob",
        "not-data",
        "option",
        "name",
        "url-glob",
        "url-in-list",
        "not-a-list",
        "file-url",
    ],
)
def test_a_bad_source_is_one_sentence_and_exit_2(
    twicerun, write_pipeline, partitions, monkeypatch, call, message
):
    monkeypatch.setenv("TLC_FILES", ",".join(str(p) for p in partitions.glob("*.parquet")))
    path = write_pipeline(SOURCED.replace('ctx.source("raw", FILES, union_by_name=True)', call))
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 2, outcome.err
    assert message in outcome.err


# The TLC backfill ---------------------------------------------------------------------


def test_the_backfill_is_quiet_in_the_loop_and_caught_by_file_order(
    twicerun, partitions, monkeypatch
):
    monkeypatch.setenv("TWICERUN_TLC_DIR", str(partitions))
    outcome = twicerun("run", REPO / "pipelines" / "tlc_backfill.py", "--amplify", "--json", "-")
    assert outcome.code == 4, outcome.err
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    backfill = steps["revenue_by_month"]
    assert (backfill["fired"], backfill["compared"]) == (0, 4)
    assert backfill["status"] == "STABLE_ON_THIS_INPUT"
    (order,) = [a for a in backfill["amplifiers"] if a["kind"] == "file order"]
    assert order["fired"] == order["compared"] > 0
    assert any("cbd_congestion_fee" in c["error"] for c in order["comparisons"])
    text = twicerun("run", REPO / "pipelines" / "tlc_backfill.py", "--amplify").out
    assert "under file order" in text and "cbd_congestion_fee" in text


def test_the_union_by_name_twin_exits_0(twicerun, partitions, monkeypatch):
    monkeypatch.setenv("TWICERUN_TLC_DIR", str(partitions))
    outcome = twicerun("run", REPO / "pipelines" / "tlc_backfill_twin.py", "--amplify")
    assert outcome.code == 0, outcome.out + outcome.err


def test_the_backfill_without_its_files_says_how_to_get_them(twicerun, tmp_path, monkeypatch):
    monkeypatch.setenv("TWICERUN_TLC_DIR", str(tmp_path / "empty"))
    outcome = twicerun("run", REPO / "pipelines" / "tlc_backfill.py")
    assert outcome.code == 3
    assert "scripts/tlc_partitions.py" in outcome.err


def test_the_duckdb_facts_hold_and_a_broken_one_is_named(partitions, tmp_path, capsys):
    schema = _script("tlc_schema")
    assert schema.main(["--dir", str(partitions)]) == 0
    # December with the new column already: "oldest first drops it" no longer holds.
    import duckdb

    broken = tmp_path / "broken"
    broken.mkdir()
    for p in partitions.glob("*.parquet"):
        (broken / p.name).write_bytes(p.read_bytes())
    con = duckdb.connect()
    december = broken / "green_tripdata_2024-12.parquet"
    con.execute(
        f"COPY (SELECT *, 0.0 AS cbd_congestion_fee FROM '{partitions / december.name}') "
        f"TO '{december}' (FORMAT parquet)"
    )
    capsys.readouterr()
    assert schema.main(["--dir", str(broken)]) == 1
    assert "oldest first no longer drops cbd_congestion_fee" in capsys.readouterr().err


# fetch_tlc: verification only; the download is never called here ----------------------


def test_fetch_verifies_size_and_digest_and_refuses_what_does_not_match(partitions, tmp_path):
    fetch = _script("fetch_tlc")
    record = fetch.record(partitions, tmp_path / "tlc_files.json")
    assert all(c.ok for c in fetch.verify(partitions, record))
    assert not any(c.ok for c in fetch.verify(partitions, {}))
    tampered = {**record}
    name = fetch.file_name("2025-01")
    tampered[name] = {**record[name], "sha256": "0" * 64}
    checks = {c.name: c for c in fetch.verify(partitions, tampered)}
    assert not checks[name].ok and "SHA-256 differs" in checks[name].why
    missing = fetch.verify(tmp_path / "nowhere", record)
    assert all("missing" in c.why for c in missing)


def test_fetch_refuses_to_run_without_a_record(monkeypatch, capsys, tmp_path):
    fetch = _script("fetch_tlc")
    monkeypatch.setattr(fetch, "RECORD", tmp_path / "absent.json")
    assert fetch.main(["--dir", str(tmp_path)]) == 2
    assert "--record" in capsys.readouterr().err


def _landing_pipeline(write_pipeline, data: Path, append_when: str = "True") -> Path:
    """Step 0 stands for another process appending a line to the landing file `data`, on
    each of its calls `n` (from 0) where `append_when` holds; step 1 reads it as a source."""
    return write_pipeline(
        f"""
        import itertools

        _runs = itertools.count()


        def another_process(ctx):
            n = next(_runs)
            if {append_when}:
                with open({str(data)!r}, "a") as f:
                    f.write(f"{{100 + n}}\\n")
            ctx.write("marker", "SELECT 1 AS m")


        def load(ctx):
            ctx.source("raw", {str(data)!r})
            ctx.write("total", "SELECT count(*) AS n, sum(a) AS s FROM raw")
        """
    )


def test_file_order_declining_a_step_whose_sql_reads_files_itself_says_what_would_let_it(
    write_pipeline, twicerun, tmp_path
):
    """`read_csv('data/*.csv') LIMIT 60` depends on the order of the files, and file order
    said only that the step reads no list through ctx.source, as it says of a step that
    reads no files at all. One file named in SQL has no other order and gets no more."""
    data = tmp_path / "data"
    data.mkdir()
    for month in (1, 2):
        (data / f"m{month}.csv").write_text("id\n" + "".join(f"{month}{i}\n" for i in range(5)))
    path = write_pipeline(
        f"""
        def globbed(ctx):
            ctx.write("raw", "SELECT * FROM read_csv('{data}/*.csv') LIMIT 6")


        def one_file(ctx):
            ctx.write("one", "SELECT * FROM read_csv('{data}/m1.csv')")
        """
    )
    steps = twicerun("run", path, "--runs", "2", "--amplify", "--json", "-").json()["steps"]
    declined = [next(a for a in s["amplifiers"] if a["kind"] == "file order") for s in steps]
    plain = "this step reads no list of files through ctx.source, so there is no order to change"
    assert [a["declined"] for a in declined] == [
        f"{plain} (its SQL reads '{data}/*.csv' itself, in an order only DuckDB decides; read "
        f"through ctx.source(name, files), they are recorded and reordered)",
        plain,
    ]


def test_the_step_whose_copy_lands_a_source_file_is_named(write_pipeline, twicerun, tmp_path):
    """A step landed one batch per run with COPY, and a later step read every batch
    through a glob: the note said the files changed, not which step wrote them."""
    land = tmp_path / "land"
    land.mkdir()
    path = write_pipeline(
        f"""
        import itertools

        _batch = itertools.count()


        def land_batch(ctx):
            b = next(_batch)
            ctx.sql(f"COPY (SELECT range AS id FROM range(3)) TO '{land}/batch_{{b}}.parquet'")
            ctx.write("landed", f"SELECT {{b}} AS batch")


        def load_all(ctx):
            ctx.read("landed")
            ctx.source("batches", "{land}/*.parquet")
            ctx.write("n", "SELECT count(*) AS n FROM batches")
        """
    )
    outcome = twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-")
    load = outcome.json()["steps"][1]
    assert load["notes"][-1] == (
        f"step 0 land_batch writes files {land}/batch_1.parquet and {land}/batch_2.parquet "
        f"past ctx.write"
    )


def test_a_source_file_that_changes_between_runs_is_named_and_not_called_parallel_order(
    write_pipeline, twicerun, tmp_path
):
    # Another process appending to the file between runs was reported as PARALLEL_ORDER:
    # the bisect re-read the file once it had stopped changing, and one thread was quiet.
    data = tmp_path / "landing.csv"
    data.write_text("a\n1\n2\n")
    path = _landing_pipeline(write_pipeline, data)
    outcome = twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-")
    load = outcome.json()["steps"][1]
    assert (load["fired"], load["status"], load["cause"], load["bisect"]) == (
        2, "DIVERGENT", None, None,
    )  # fmt: skip
    assert load["notes"] == [
        f"not bisected: the files it read through ctx.source changed between runs ({data}: "
        f"not as run 1 read it in runs 2, 3), so its runs did not all read the same input, "
        f"and one thread reading them again now could not say why it differed",
        # And which step to look at: the one that appended to it while it ran.
        f"step 0 another_process writes file {data} past ctx.write",
    ]
    # localize over the invocation says so too, as diff does beside a step; it named
    # the step and the rows that differed, and nothing of the file that had changed.
    located = twicerun("localize", outcome.json()["artifacts"])
    assert located.code == 1
    assert located.out.splitlines()[0].startswith("located: step 1 load of ")
    assert f"  its inputs differ: source raw ({data} with other bytes)" in located.out.splitlines()


def test_a_source_is_counted_again_when_its_files_change_and_not_when_they_do_not(
    write_pipeline, twicerun, tmp_path, run_dir
):
    # A list's row count is kept per process, since every query over a CSV list makes
    # DuckDB sniff the files again; it is kept by the files' digests, so new bytes count anew.
    data = tmp_path / "landing.csv"
    data.write_text("a\n1\n2\n")
    # Appended to before runs 2 and 3, not before run 4.
    path = _landing_pipeline(write_pipeline, data, append_when="n in (1, 2)")
    twicerun("run", path, "--runs", "4", "--no-amplify")
    (invocation,) = [d for d in run_dir.iterdir() if d.is_dir()]
    counted = [
        json.loads((invocation / "loop" / str(run) / "01-load" / "receipt.json").read_text())[
            "sources"
        ][0]["rows"]
        for run in (1, 2, 3, 4)
    ]
    assert counted == [2, 3, 4, 4]


def test_a_source_path_under_the_home_directory_is_read_as_duckdb_reads_it(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    """DuckDB reads `~/landing/a.parquet` from the home directory; twicerun refused it as a
    file that does not exist, "read from the working directory"."""
    import duckdb

    home = tmp_path / "home"
    (home / "landing").mkdir(parents=True)
    duckdb.connect().execute(
        f"COPY (SELECT range AS v FROM range(4)) TO '{home / 'landing' / 'a.parquet'}'"
    )
    monkeypatch.setenv("HOME", str(home))
    path = write_pipeline(
        """
        def landed(ctx):
            ctx.source("land", "~/landing/a.parquet")
            ctx.write("n", "SELECT count(*) AS n FROM land")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert outcome.code == 0, outcome.err
    (source,) = outcome.json()["steps"][0]["sources"]
    assert source["rows"] == 4
    assert [f["path"] for f in source["files"]] == [str(home / "landing" / "a.parquet")]


def test_files_named_like_globs_are_read_as_duckdb_reads_them_and_named_as_read(
    write_pipeline, twicerun, tmp_path, run_dir
):
    """A glob's files were read back by name, and DuckDB took `part[1].csv` as a glob again:
    it read part1.csv twice and part[1].csv never, while the receipt named all three. A glob
    inside a list was refused as a file that does not exist."""
    import duckdb

    land = tmp_path / "land"
    land.mkdir()
    for name, ids in {"part[1]": [1, 2], "part1": [9], "st*r?": [5], "stXrY": [6]}.items():
        (land / f"{name}.csv").write_text("id\n" + "".join(f"{i}\n" for i in ids))
    calls = {
        "globbed": f"{land}/*.csv",
        # DuckDB reads each entry of a list as a glob too, a file named like one included.
        "listed": [f"{land}/part[1].csv", f"{land}/st*r?.csv"],
    }
    path = write_pipeline(
        "".join(
            f"def {step}(ctx):\n"
            f"    ctx.source('raw', {files!r})\n"
            f"    ctx.write('{step}_ids', 'SELECT id FROM raw')\n\n\n"
            for step, files in calls.items()
        )
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert outcome.code == 0, outcome.err
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    (invocation,) = [p for p in run_dir.iterdir() if p.is_dir()]
    plain = duckdb.connect()
    names = {"globbed": ["part1.csv", "part[1].csv", "st*r?.csv", "stXrY.csv"]}
    names["listed"] = ["part1.csv", "st*r?.csv", "stXrY.csv"]
    for index, (step, files) in enumerate(calls.items()):
        # The rows are what DuckDB reads for the same call outside twicerun.
        artifact = invocation / "loop" / "1" / f"{index:02d}-{step}" / f"{step}_ids.parquet"
        wrote = plain.execute(f"SELECT id FROM read_parquet('{artifact}') ORDER BY id").fetchall()
        assert wrote == plain.execute(f"SELECT id FROM read_csv({files!r}) ORDER BY id").fetchall()
        (source,) = steps[step]["sources"]
        assert source["rows"] == len(wrote)
        # And the receipt names the files those rows came from.
        assert sorted(Path(f["path"]).name for f in source["files"]) == names[step]


# The input amplifiers on a source -------------------------------------------------------

FIRST_OF_A_SOURCE = """
import os

def first_per_key(ctx):
    ctx.source("raw", os.environ["ONE_FILE"])
    ctx.sql("SET threads = 1")
    ctx.write("firsts", "SELECT i % 10 AS k, first(j) AS j FROM raw GROUP BY ALL")

def first_per_key_tiebreak(ctx):
    ctx.source("raw", os.environ["ONE_FILE"])
    ctx.sql("SET threads = 1")
    ctx.write("firsts_tiebreak", "SELECT i % 10 AS k, arg_min(j, i) AS j FROM raw GROUP BY ALL")
"""


def test_rows_read_through_a_source_are_stressed_like_an_artifact(
    twicerun, write_pipeline, tmp_path, monkeypatch, run_dir
):
    """A step that keeps the first row per key of one file, on one thread, is deterministic
    for as long as the rows arrive in one order; only arrival order can show it. It came
    out NO_DIVERGENCE_OBSERVED: the input amplifiers stressed only what ctx.read read."""
    data = tmp_path / "one.csv"
    # j repeats here and there, so it is no key the amplifiers would keep distinct.
    data.write_text("i,j\n" + "".join(f"{i},{(i * 7919) % 150}\n" for i in range(200)))
    monkeypatch.setenv("ONE_FILE", str(data))
    outcome = twicerun("run", write_pipeline(FIRST_OF_A_SOURCE), "--amplify", "--json", "-")
    steps = {s["name"]: s for s in outcome.json()["steps"]}
    broken, twin = steps["first_per_key"], steps["first_per_key_tiebreak"]
    assert broken["fired"] == 0 and broken["status"] == "STABLE_ON_THIS_INPUT", broken
    (order,) = [a for a in broken["amplifiers"] if a["kind"] == "arrival order"]
    assert order["fired"] > 0 and order["detail"].startswith("source raw: run 1 as written")
    (files,) = [a for a in broken["amplifiers"] if a["kind"] == "file order"]
    # It said "its source raw is one file each".
    assert files["declined"] == "its source raw is one file, so there is no other order"
    assert twin["status"] == "NO_DIVERGENCE_OBSERVED", twin
    assert {a["kind"] for a in twin["amplifiers"] if a["declined"] is None} >= {
        "tie collapse",
        "row multiplication",
        "arrival order",
    }
    assert outcome.code == 4
    # The copies of the source were the invocation's, and are gone with its amplified inputs.
    (invocation,) = [p for p in run_dir.iterdir() if p.is_dir()]
    assert not (invocation / "amplified").exists()
    assert data.read_text().startswith("i,j\n0,0\n")  # the file itself untouched


def _receipt_reading(*names: str, row_files: tuple[str, ...] = ()):
    from types import SimpleNamespace

    from twicerun.storage.receipts import SourceRecord

    sources = [SourceRecord(name=n, reader="parquet", files=[], rows=3) for n in names]
    return SimpleNamespace(reads=[], sources=sources, row_files=list(row_files))


def test_a_source_the_amplifiers_cannot_copy_is_named_with_the_reason():
    """Nothing is copied, and the decline says which source and why, once."""
    from types import SimpleNamespace

    from twicerun.runner.stress import _Inputs

    bench = SimpleNamespace(connections=SimpleNamespace(name="duckdb"))
    inputs = _Inputs(bench, None, None, _receipt_reading("raw", "raw"), {})
    assert inputs.names == []
    assert inputs.nothing_to_stress() == (
        "this step reads no artifact through ctx.read, and its source raw is read more than "
        "once, from different calls, so no one copy stands in for it"
    )


def test_a_source_read_for_the_file_of_each_row_is_not_copied():
    """Spark notes a step that reads which file each row came from; its stressed copy, one
    file, would make every row come from one file."""
    from types import SimpleNamespace

    from twicerun.runner.stress import _Inputs

    bench = SimpleNamespace(connections=SimpleNamespace(name="spark"))
    receipt = _receipt_reading("raw", row_files=("input_file_name()",))
    inputs = _Inputs(bench, None, None, receipt, {})
    assert inputs.names == []
    assert inputs.nothing_to_stress() == (
        "this step reads no artifact through ctx.read, and its source raw is read for the "
        "file each row came from (input_file_name()), which a stressed copy, one file "
        "elsewhere, would change for every row"
    )


READ_TWICE_BESIDE_AN_ARTIFACT = """
import os

def keys(ctx):
    ctx.write("keys", "SELECT range AS k FROM range(20)")

def joined(ctx):
    ctx.read("keys")
    ctx.source("raw", os.environ["ONE_FILE"])
    ctx.sql("CREATE TABLE a AS SELECT * FROM raw")
    ctx.source("raw", os.environ["ONE_FILE"])
    ctx.write("joined", "SELECT k, count(*) AS n FROM keys JOIN raw ON k = i % 20 GROUP BY k")
"""


def test_a_source_left_unstressed_beside_a_stressed_artifact_is_named_in_the_detail(
    twicerun, write_pipeline, tmp_path, monkeypatch
):
    """Where some input was stressed, an amplifier's detail used to say only what was:
    a source it could not copy went unmentioned, and 0 of 2 read as if it had been varied."""
    data = tmp_path / "one.csv"
    data.write_text("i\n" + "".join(f"{i}\n" for i in range(100)))
    monkeypatch.setenv("ONE_FILE", str(data))
    outcome = twicerun(
        "run", write_pipeline(READ_TWICE_BESIDE_AN_ARTIFACT), "--amplify", "--json", "-"
    )
    (step,) = [s for s in outcome.json()["steps"] if s["name"] == "joined"]
    stressed = [a for a in step["amplifiers"] if a["kind"] == "row multiplication"]
    assert stressed[0]["detail"].endswith(
        "; not stressed: its source raw is read more than once, from different calls, so no "
        "one copy stands in for it"
    )


NUMBERED_BY_RUN = """
import os

FILES = os.environ["NUMBERED_FILES"].split(",")
RUNS = []


def numbered(ctx):
    RUNS.append(1)
    ctx.source("raw", FILES)
    # Every other run numbers the rows the other way round: a surrogate key whose pairing
    # with the ids moved, and nothing else.
    direction = "ASC" if len(RUNS) % 2 else "DESC"
    ctx.write("numbered", f"SELECT row_number() OVER (ORDER BY id {direction}) AS n, id FROM raw")
"""


def test_a_column_a_step_invented_beside_its_source_columns_is_the_one_named(
    twicerun, write_pipeline, monkeypatch, tmp_path
):
    import duckdb

    files = []
    for part in range(2):
        path = tmp_path / f"part{part}.parquet"
        duckdb.sql(
            f"COPY (SELECT range AS id FROM range({part * 50}, {part * 50 + 50})) "
            f"TO '{path}' (FORMAT parquet)"
        )
        files.append(str(path))
    monkeypatch.setenv("NUMBERED_FILES", ",".join(files))
    outcome = twicerun("run", write_pipeline(NUMBERED_BY_RUN), "--runs", "3", "--no-amplify")
    assert outcome.code == 1, outcome.err
    # Dropping either column pairs every row; `id` came in with the files the step read
    # through ctx.source, so `n` is the one the step made up.
    assert (
        "dropping n from the key pairs every row; id does the same, and n is named because "
        "no input of this step has that column"
    ) in outcome.out


def test_diff_names_the_files_of_a_source_that_differ(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    # diff said "its inputs differ: source raw" and left the reader to find which file.
    data = tmp_path / "landing"
    data.mkdir()
    for name in ("a", "b"):
        (data / f"{name}.csv").write_text("n\n1\n")
    path = write_pipeline(
        "import os\n\n\n"
        "def load(ctx):\n"
        f"    files = [{str(data / 'a.csv')!r}, {str(data / 'b.csv')!r}]\n"
        '    if os.environ.get("REVERSED"):\n'
        "        files.reverse()\n"
        '    extra = os.environ.get("EXTRA")\n'
        '    ctx.source("raw", files + ([extra] if extra else []))\n'
        '    ctx.write("n", "SELECT sum(n) AS total FROM raw")\n'
    )

    def record() -> str:
        outcome = twicerun("run", path, "--runs", "2", "--no-amplify", "--keep", "0", "--json", "-")
        assert outcome.code == 0, outcome.err
        return outcome.json()["artifacts"]

    first = record()
    (data / "b.csv").write_text("n\n2\n")
    (data / "c.csv").write_text("n\n3\n")
    monkeypatch.setenv("EXTRA", str(data / "c.csv"))
    second = record()
    (verdict,) = twicerun("diff", first, second, "--json", "-").json()["steps"]
    assert verdict["inputs"] == (
        f"differ: source raw ({data / 'c.csv'} only in the second; {data / 'b.csv'} with "
        f"other bytes)"
    )
    monkeypatch.delenv("EXTRA")
    monkeypatch.setenv("REVERSED", "1")
    (data / "b.csv").write_text("n\n1\n")
    third = record()
    (verdict,) = twicerun("diff", first, third, "--json", "-").json()["steps"]
    assert verdict["inputs"] == "differ: source raw (the same files, listed in another order)"


def test_a_list_naming_one_file_twice_has_no_other_order(twicerun, write_pipeline, tmp_path):
    # Reversing [a, a] reads the same files in the same order, and the report said "file
    # order 0 of 2" as if an order had been varied.
    data = tmp_path / "a.csv"
    data.write_text("n\n1\n2\n")
    path = write_pipeline(
        "def load(ctx):\n"
        f"    ctx.source('raw', [{str(data)!r}, {str(data)!r}])\n"
        '    ctx.write("n", "SELECT count(*) AS n FROM raw")\n'
    )
    outcome = twicerun("run", path, "--runs", "2", "--amplify", "--json", "-")
    (step,) = outcome.json()["steps"]
    (files,) = [a for a in step["amplifiers"] if a["kind"] == "file order"]
    assert files["declined"] == (
        "its source raw is one file (listed 2 times), so there is no other order"
    )


def test_a_step_that_raises_only_in_another_file_order_says_so_under_its_own_line(
    twicerun, write_pipeline, tmp_path
):
    # The files' headers differ; DuckDB reads them in the listed order and raises in the
    # other. The step's own block had nothing under it: the error was only in the
    # STABLE_ON_THIS_INPUT section further down.
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "y.csv").write_text("b,a,c\n5,6,7\n")
    path = write_pipeline(
        "def load(ctx):\n"
        f"    ctx.source('raw', [{str(tmp_path / 'x.csv')!r}, {str(tmp_path / 'y.csv')!r}])\n"
        '    ctx.write("rows", "SELECT * FROM raw")\n'
    )
    outcome = twicerun("run", path, "--runs", "2", "--amplify", "--without", "thread-count",
                       "--without", "arrival-order", "--without", "row-multiplication")  # fmt: skip
    assert outcome.code == 4, outcome.err
    lines = outcome.out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  0 load"))
    assert "STABLE_ON_THIS_INPUT" in lines[at]
    assert lines[at + 1].strip() == (
        "under file order, run 2 raised where run 1 had rows (1 of 1 did); the error is "
        "under STABLE_ON_THIS_INPUT below"
    )
