"""The loop: fire rates, containment, ctx.state in both modes, and pruning identical copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from twicerun.result import load_result
from twicerun.storage.receipts import load_receipt

# A step whose answer changes on every call (a module-level counter), one that reads
# it, and a control. Nothing here depends on thread scheduling, so every assertion
# below is exact.
DRIFTING = """
import itertools

_calls = itertools.count()


def source(ctx):
    ctx.write("numbers", f"SELECT range AS n, {next(_calls)} AS mark FROM range(10)")


def downstream(ctx):
    ctx.read("numbers")
    ctx.write("total", "SELECT sum(mark) AS s, count(*) AS c FROM numbers")


def control(ctx):
    ctx.write("fixed", "SELECT range AS n FROM range(100)")


def reads_control(ctx):
    ctx.read("fixed")
    ctx.write("fixed_total", "SELECT sum(n) AS s FROM fixed")
"""

APPEND = """
def append(ctx):
    ctx.state("log", "SELECT 1 AS entry WHERE false")
    ctx.write("log", "SELECT * FROM log UNION ALL SELECT 1 AS entry")
"""


def steps_by_name(result_json):
    return {s["name"]: s for s in result_json["steps"]}


def test_a_divergent_step_fires_and_its_downstream_stays_quiet_when_contained(
    write_pipeline, twicerun
):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--json", "-")
    assert outcome.code == 1
    steps = steps_by_name(outcome.json())
    assert (steps["source"]["fired"], steps["source"]["compared"]) == (4, 4)
    assert steps["source"]["status"] == "DIVERGENT"
    assert (steps["downstream"]["fired"], steps["downstream"]["compared"]) == (0, 4)
    assert steps["downstream"]["status"] == "NO_DIVERGENCE_OBSERVED"
    assert steps["control"]["fired"] == 0


def test_without_containment_the_downstream_step_inherits_the_divergence(write_pipeline, twicerun):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--no-containment", "--json", "-")
    assert outcome.code == 1
    steps = steps_by_name(outcome.json())
    assert outcome.json()["contained"] is False
    assert steps["downstream"]["fired"] == 4
    assert steps["reads_control"]["fired"] == 0


def test_contained_state_is_always_the_reference_runs_copy(write_pipeline, twicerun, run_dir):
    path = write_pipeline(APPEND)
    outcome = twicerun("run", path, "--json", "-")
    step = outcome.json()["steps"][0]
    # Run 1 starts from the initial query (1 row); every later run appends once to run 1's copy.
    assert [c["artifacts"][0]["reference_rows"] for c in step["comparisons"]] == [1, 1, 1, 1]
    assert [c["artifacts"][0]["later_rows"] for c in step["comparisons"]] == [2, 2, 2, 2]
    assert step["fired"] == 4
    root = Path(outcome.json()["artifacts"])
    reads = [load_receipt(root / "loop" / str(k) / "00-append").reads[0] for k in (1, 2, 5)]
    assert [(r.via, r.run, r.rows) for r in reads] == [
        ("state", None, 0),
        ("state", "loop/1", 1),
        ("state", "loop/1", 1),
    ]


def test_uncontained_state_is_the_previous_runs_copy_so_reruns_pile_up(write_pipeline, twicerun):
    path = write_pipeline(APPEND)
    outcome = twicerun("run", path, "--no-containment", "--json", "-")
    step = outcome.json()["steps"][0]
    assert [c["artifacts"][0]["later_rows"] for c in step["comparisons"]] == [2, 3, 4, 5]
    root = Path(outcome.json()["artifacts"])
    read = load_receipt(root / "loop" / "4" / "00-append").reads[0]
    assert (read.via, read.run, read.rows) == ("state", "loop/3", 3)


def test_a_deterministic_pipeline_exits_zero_with_every_step_at_zero(write_pipeline, twicerun):
    path = write_pipeline(
        """
        def control(ctx):
            ctx.write("fixed", "SELECT range AS n, range * 0.5 AS half FROM range(1000)")

        def total(ctx):
            ctx.read("fixed")
            ctx.write("total", "SELECT count(*) AS c, min(half) AS lo FROM fixed")
        """
    )
    outcome = twicerun("run", path, "--runs", "3", "--json", "-")
    assert outcome.code == 0
    assert [(s["fired"], s["compared"], s["status"]) for s in outcome.json()["steps"]] == [
        (0, 2, "NO_DIVERGENCE_OBSERVED"),
        (0, 2, "NO_DIVERGENCE_OBSERVED"),
    ]


def test_later_copies_identical_to_run_1_are_pruned_and_recorded(write_pipeline, twicerun):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--json", "-")
    root = Path(outcome.json()["artifacts"])
    control_2 = load_receipt(root / "loop" / "2" / "02-control")
    assert control_2.artifacts[0].kept is False
    assert control_2.artifacts[0].same_as == "loop/1"
    assert not (root / "loop" / "2" / "02-control" / "fixed.parquet").exists()
    # Copies that differ go too, once compared: their findings are in the Result.
    for run in (2, 5):
        source = load_receipt(root / "loop" / str(run) / "00-source")
        assert (source.artifacts[0].kept, source.artifacts[0].same_as) == (False, None)
        assert not (root / "loop" / str(run) / "00-source" / "numbers.parquet").exists()
    comparison_2 = outcome.json()["steps"][0]["comparisons"][0]["artifacts"][0]
    assert comparison_2["findings"]["classes"] == ["ROW_MISSING", "ROW_EXTRA"]
    assert sorted(p.parent.name for p in (root / "loop").rglob("*.parquet")) == [
        "00-source",
        "01-downstream",
        "02-control",
        "03-reads_control",
    ]  # run 1's, and nothing else


def test_a_later_runs_receipt_is_written_once(write_pipeline, twicerun, monkeypatch):
    """Compared and pruned at once, a later run's receipt changes two or three times
    (digests, then pruned or discarded); it is held back and written once, in its
    final form, on the loop's own path."""
    from twicerun.runner import execute, records

    writes: dict[tuple[str, ...], int] = {}
    real = records.save_receipt

    def counting(step_dir, receipt):
        where = Path(step_dir).parts[-3:]  # series, run, step
        writes[where] = writes.get(where, 0) + 1
        real(step_dir, receipt)

    monkeypatch.setattr(execute, "save_receipt", counting)
    monkeypatch.setattr(records, "save_receipt", counting)
    outcome = twicerun("run", write_pipeline(DRIFTING), "--json", "-")
    assert outcome.code == 1
    later = {w: n for w, n in writes.items() if w[0] == "loop" and w[1] != "1"}
    assert len(later) == 4 * 4 and set(later.values()) == {1}
    root = Path(outcome.json()["artifacts"])
    differing = load_receipt(root / "loop" / "3" / "00-source").artifacts[0]
    assert (differing.kept, differing.same_as) == (False, None)
    assert differing.canonical_digest  # computed for the comparison, and kept
    assert load_receipt(root / "loop" / "3" / "02-control").artifacts[0].same_as == "loop/1"


def _chain(steps: int) -> str:
    source = ['def s0(ctx):\n    ctx.write("t0", "SELECT range AS id FROM range(3)")\n']
    for i in range(1, steps):
        source.append(
            f"def s{i}(ctx):\n    ctx.read('t{i - 1}')\n"
            f"    ctx.write('t{i}', 'SELECT id + 1 AS id FROM t{i - 1}')\n"
        )
    return "\n\n".join(source)


def test_each_execution_resolves_only_what_it_reads(write_pipeline, twicerun, monkeypatch):
    """Every execution used to resolve every earlier step's artifacts before it ran, so
    a pipeline's bookkeeping grew with the square of its length (on 120 steps, most of
    a second). Now a step's reads are resolved when it makes them."""
    from twicerun.runner.records import Records

    resolved = []
    real = Records.ref

    def counting(self, address, index, name):
        resolved.append(name)
        return real(self, address, index, name)

    monkeypatch.setattr(Records, "ref", counting)
    per_step = {}
    for steps in (5, 20):
        resolved.clear()
        assert twicerun("run", write_pipeline(_chain(steps)), "--runs", "3").code == 0
        per_step[steps] = len(resolved) / steps
    # Linear: four times the steps, about the same resolving per step (it was ~3x).
    assert per_step[20] <= 1.5 * per_step[5], per_step


def test_the_amplifiers_connections_are_opened_ahead(write_pipeline, twicerun, monkeypatch):
    """A series at raised threads used to open its first connection on the loop's own
    path, after its inputs were written; it now opens on a helper meanwhile."""
    import threading

    from twicerun.runner import loop
    from twicerun.storage import connections

    opened_here = []
    real = connections.open_connection

    def recording(*args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            opened_here.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(connections, "open_connection", recording)
    monkeypatch.setattr(loop, "open_connection", recording)
    outcome = twicerun("run", write_pipeline(_chain(4)), "--runs", "3", "--amplify")
    assert outcome.code == 0, outcome.err
    # The connection twicerun digests and compares on, and the first execution's, which
    # nothing was opened ahead for.
    assert len(opened_here) == 2, opened_here


def test_the_bisect_opens_no_connection_past_the_executions_it_can_make(
    write_pipeline, twicerun, opened_connections
):
    """The bisect expected the loop's full count of executions, though its stopping rule
    settles a step the loop saw differ every time in three; the helpers kept opening for
    the rest, and most invocations whose steps fired ended with connections nobody used."""
    path = write_pipeline(
        """
        def by_threads(ctx):
            # Another answer on every run at more threads than one, the same one at one.
            ctx.write("x", "SELECT random() AS v" if ctx.threads > 1 else "SELECT 0.5 AS v")
        """
    )
    outcome = twicerun("run", path, "--json", "-")
    (step,) = outcome.json()["steps"]
    assert (step["fired"], step["cause"]) == (4, "PARALLEL_ORDER")
    assert step["bisect"]["compared"] == 2
    assert opened_connections.count(1) == 3


def test_the_bisects_expected_executions_are_where_its_stopping_rule_stops_it():
    from types import SimpleNamespace

    from twicerun.runner.bisect import enough, most_executions

    quiet = SimpleNamespace(differs=False, error=None)
    for compared in range(1, 9):
        for differed in range(compared + 1):
            for runs in range(2, 7):
                stop, comparisons = enough(differed, compared), []
                while len(comparisons) + 1 < runs and not stop(comparisons):
                    comparisons.append(quiet)
                assert most_executions(differed, compared, runs) == len(comparisons) + 1


def test_keep_copies_keeps_the_latest_differing_copy_of_each_step(write_pipeline, twicerun):
    path = write_pipeline(DRIFTING)
    root = Path(twicerun("run", path, "--keep-copies", "--json", "-").json()["artifacts"])
    assert not (root / "loop" / "2" / "00-source" / "numbers.parquet").exists()
    assert load_receipt(root / "loop" / "5" / "00-source").artifacts[0].kept is True
    assert (root / "loop" / "5" / "00-source" / "numbers.parquet").exists()


@pytest.mark.parametrize("containment", ["--containment", "--no-containment"])
def test_keep_copies_keeps_the_latest_copy_that_differed_when_later_runs_agree(
    write_pipeline, twicerun, containment
):
    """Runs 2 and 3 differ from run 1, runs 4 and 5 agree with it. Each later run deleted
    the run before it's copy, so run 3's went when run 4 came, and run 4's and 5's were
    pruned as identical: --keep-copies kept nothing, and diff said to use --keep-copies."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count(1)


        def flaky(ctx):
            run = next(_calls)
            ctx.write("numbers", f"SELECT range AS n, {int(run in (2, 3))} AS mark FROM range(10)")
        """
    )
    outcome = twicerun("run", path, containment, "--keep-copies", "--json", "-")
    assert outcome.json()["steps"][0]["fired"] == 2
    root = Path(outcome.json()["artifacts"])
    on_disk = [
        run
        for run in range(1, 6)
        if (root / "loop" / str(run) / "00-flaky" / "numbers.parquet").exists()
    ]
    assert on_disk == [1, 3]
    assert load_receipt(root / "loop" / "3" / "00-flaky").artifacts[0].kept is True
    assert load_receipt(root / "loop" / "2" / "00-flaky").artifacts[0].kept is False


def test_uncontained_readers_of_a_pruned_copy_are_sent_to_run_1s(write_pipeline, twicerun):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--no-containment", "--json", "-")
    root = Path(outcome.json()["artifacts"])
    read = load_receipt(root / "loop" / "3" / "03-reads_control").reads[0]
    assert (read.name, read.run, read.rows) == ("fixed", "loop/3", 100)
    assert steps_by_name(outcome.json())["reads_control"]["fired"] == 0


def test_a_step_that_writes_nothing_gets_no_status(write_pipeline, twicerun):
    path = write_pipeline(
        """
        def silent(ctx):
            ctx.sql("SELECT 1")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    step = outcome.json()["steps"][0]
    assert (step["fired"], step["compared"], step["status"]) == (0, 0, None)
    assert outcome.code == 0


def test_an_artifact_written_by_one_run_only_fires(write_pipeline, twicerun):
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def sometimes(ctx):
            if next(_calls) == 0:
                ctx.write("only_first", "SELECT 1 AS one")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    comparison = outcome.json()["steps"][0]["comparisons"][0]
    assert comparison["fired"] is True
    assert comparison["artifacts"][0]["presence"] == "reference only"


def test_fewer_than_two_runs_is_refused_before_anything_runs(write_pipeline, twicerun, run_dir):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--runs", "1")
    assert outcome.code == 2
    assert outcome.err == (
        "twicerun: --runs 1: at least 2 runs are needed, since run 1 is the reference and "
        "every later run is compared against it\n"
    )
    assert not run_dir.exists()


def test_threads_default_to_duckdbs_choice_and_can_be_set(write_pipeline, twicerun):
    import duckdb

    path = write_pipeline(
        """
        def records_threads(ctx):
            ctx.write("t", f"SELECT {ctx.threads} AS threads, current_setting('threads') AS set")
        """
    )
    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0]
    assert twicerun("run", path, "--runs", "2", "--json", "-").json()["environment"][
        "threads"
    ] == int(default)
    outcome = twicerun("run", path, "--runs", "2", "--threads", "3", "--json", "-")
    assert outcome.json()["environment"]["threads"] == 3
    root = Path(outcome.json()["artifacts"])
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT * FROM read_parquet('{root}/loop/1/00-records_threads/t.parquet')"
    ).fetchall()
    assert rows == [(3, 3)]


def test_the_manifest_stamps_the_instrument(write_pipeline, twicerun):
    import platform

    import duckdb

    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    manifest = json.loads((Path(outcome.json()["artifacts"]) / "invocation.json").read_text())
    assert manifest["outcome"] == "completed"
    assert manifest["duckdb"] == duckdb.__version__
    assert manifest["python"] == platform.python_version()
    assert manifest["containment"] is True
    assert manifest["pipeline_digest"] == outcome.json()["pipeline_digest"]
    assert {"threads", "platform", "twicerun", "pipeline", "runs"} <= set(manifest)


@pytest.mark.parametrize("runs", [2, 3])
def test_m_is_runs_minus_one(write_pipeline, twicerun, runs):
    path = write_pipeline(DRIFTING)
    step = twicerun("run", path, "--runs", str(runs), "--json", "-").json()["steps"][0]
    assert (step["fired"], step["compared"]) == (runs - 1, runs - 1)


def test_the_saved_result_is_the_one_printed(write_pipeline, twicerun):
    path = write_pipeline(DRIFTING)
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    saved = load_result(Path(outcome.json()["artifacts"]) / "result.json")
    assert saved.to_dict() == outcome.json()


REORDERED = """
import itertools

_calls = itertools.count()


def shuffled(ctx):
    # The same ten rows, in another order on every call: different bytes, same rows.
    ctx.write("rows", f"SELECT range AS n FROM range(10) ORDER BY hash(range + {next(_calls)})")


def fixed(ctx):
    ctx.write("same", "SELECT range AS n FROM range(10)")
"""


def test_run_1_names_every_answer_by_its_canonical_digest_and_bytes_settle_what_they_can(
    write_pipeline, twicerun
):
    path = write_pipeline(REORDERED)
    outcome = twicerun("run", path, "--no-amplify", "--json", "-")
    root = Path(outcome.json()["artifacts"])
    shuffled, fixed = outcome.json()["steps"]
    # Reordered rows are settled by the canonical digest, and are not a difference.
    assert shuffled["fired"] == 0
    assert {a["settled_by"] for c in shuffled["comparisons"] for a in c["artifacts"]} == {
        "canonical digest"
    }
    assert load_receipt(root / "loop" / "1" / "00-shuffled").artifacts[0].canonical_digest
    # Equal bytes settle the control; no later run needed its rows read.
    assert {a["settled_by"] for c in fixed["comparisons"] for a in c["artifacts"]} == {"bytes"}
    # Run 1's receipts name every answer, so a recorded-run verdict can (receipt v2).
    first = load_receipt(root / "loop" / "1" / "01-fixed")
    assert first.version == 2 and first.artifacts[0].canonical_digest
    assert first.code_digest and first.duckdb and first.platform


def test_the_platform_stamp_is_system_and_machine_without_the_kernel_build():
    import platform

    from twicerun.runner.environment import stamp

    assert stamp(2).platform == f"{platform.system()}-{platform.machine()}"
    assert platform.release() not in stamp(2).platform


def test_a_comparison_the_digests_settled_costs_no_query_of_the_worst_kept():
    """Only the oracle keeps a table of disagreeing groups, so a comparison settled by
    bytes, digests or presence has nothing to drop: asking the database anyway cost a
    query per artifact per run (on the tiny-step bench, most of the loop's comparisons)."""
    import duckdb

    from twicerun.findings import ArtifactOutcome
    from twicerun.result import Comparison
    from twicerun.runner.settle_step import WorstComparisons
    from twicerun.vocabulary.loop import Presence, SettledBy

    con = duckdb.connect()
    worst = WorstComparisons(con)
    con.close()  # any query now raises
    settled = [
        ArtifactOutcome(f"a{i}", Presence.BOTH, by, differs=by is SettledBy.PRESENCE)
        for i, by in enumerate([SettledBy.BYTES, SettledBy.CANONICAL, SettledBy.PRESENCE])
    ]
    worst.consider(0, Comparison(run=2, fired=True, artifacts=settled))
    with pytest.raises(duckdb.ConnectionException):
        worst.consider(
            0,
            Comparison(
                run=3,
                fired=True,
                artifacts=[ArtifactOutcome("a", Presence.BOTH, SettledBy.ORACLE, differs=True)],
            ),
        )


SHARED_INPUT = """
def make(ctx):
    ctx.write("shared", "SELECT range AS id, range % 7 AS k FROM range(2000)")
    ctx.write("other", "SELECT range AS id, range % 5 AS k FROM range(2000)")


def first_reader(ctx):
    ctx.read("shared")
    ctx.write("a", "SELECT k, count(*) AS n FROM shared GROUP BY k")


def last_reader(ctx):
    ctx.read("shared")
    ctx.write("b", "SELECT k, max(id) AS top FROM shared GROUP BY k")


def reads_the_other(ctx):
    ctx.read("other")
    ctx.write("c", "SELECT k, min(id) AS low FROM other GROUP BY k")
"""


def test_stressed_copies_of_an_input_go_once_no_step_left_to_amplify_reads_it(
    write_pipeline, tmp_path, monkeypatch
):
    """The joint probe writes several copies of each input; kept to the end of the
    invocation, they held several times the inputs' size on disk at once."""
    from twicerun.runner import loop
    from twicerun.runner.loop import LoopOptions, run_pipeline

    seen = {}
    real = loop.amplify

    def watching(bench, step, stressed, runs, threads, **options):
        bench.janitor.wait()  # deletions run on a helper thread
        seen[step.name] = sorted(
            p.name.split("-")[0].removesuffix(".parquet")
            for p in (bench.invocation.root / "amplified").rglob("*.parquet")
        )
        return real(bench, step, stressed, runs, threads, **options)

    monkeypatch.setattr(loop, "amplify", watching)
    run_pipeline(
        write_pipeline(SHARED_INPUT), LoopOptions(run_dir=tmp_path / "runs", runs=3, keep=0)
    )
    # The second reader of `shared` still finds the copies the first one made...
    assert "shared" in seen["last_reader"]
    # ...and once it is done they are gone, before the next step is stressed.
    assert "shared" not in seen["reads_the_other"]


SET_ORDER = """
import pyarrow as pa


def names(ctx):
    ctx.write("names", "SELECT 'name_' || range AS n FROM range(50)")


def first_seen(ctx):
    distinct = list({row[0] for row in ctx.read("names").fetchall()})  # a set's order
    ctx.write("order", pa.table({"n": distinct, "pos": list(range(len(distinct)))}))
"""


def test_a_set_of_strings_holds_still_within_a_process_and_diff_sees_it_across_two(
    write_pipeline, twicerun, tmp_path
):
    # What one invocation cannot show, it says it did not vary; two invocations show it.
    path = write_pipeline(SET_ORDER)
    outcome = twicerun("run", path, "--runs", "3")
    assert outcome.code == 0
    assert "  1 first_seen  0 of 2  NO_DIVERGENCE_OBSERVED" in outcome.out
    assert "the Python process (its string hash seed" in outcome.out.splitlines()[-1]
    for seed, run_dir in (("1", "a"), ("2", "b")):
        done = subprocess.run(
            [sys.executable, "-m", "twicerun", "run", str(path), "--runs", "2", "--no-amplify",
             "--run-dir", str(tmp_path / run_dir)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    diff = twicerun("diff", tmp_path / "a", tmp_path / "b")
    assert diff.code == 1
    assert "   1 first_seen  FIRST DIFFERENCE" in diff.out.splitlines()


def test_a_column_of_type_null_is_compared_not_refused(write_pipeline, twicerun):
    # `NULL AS placeholder` is a NULL-typed column in DuckDB and in the Parquet it writes.
    # It holds nothing that could differ; it used to stop the whole run with exit 2.
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def with_placeholder(ctx):
            ctx.write("t", f"SELECT range AS n, {next(_calls)} AS mark, NULL AS later FROM range(3)")


        def reads_it(ctx):
            ctx.read("t")
            ctx.write("u", "SELECT n, later FROM t")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--amplify", "--json", "-")
    steps = outcome.json()["steps"]
    assert [(s["name"], s["fired"], s["compared"]) for s in steps] == [
        ("with_placeholder", 1, 1),
        ("reads_it", 0, 1),
    ]
    (artifact,) = steps[0]["comparisons"][0]["artifacts"]
    assert artifact["findings"]["key"] == ["n", "mark", "later"]
    assert not any(a["error"] for a in steps[1]["amplifiers"])
    assert outcome.code == 1


def test_a_helper_taken_for_a_step_is_told_its_answer_went_nowhere(write_pipeline, twicerun):
    """A function of the pipeline's that takes ctx first and returns rows for the steps is
    a step by the contract; run as one, it wrote nothing, and the report said only that
    nothing was compared."""
    path = write_pipeline(
        """
        def _rows(ctx):
            return ctx.sql("SELECT 1 AS n").fetchall()


        def step(ctx):
            ctx.write("t", f"SELECT {len(_rows(ctx))} AS n")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    note = (
        "returned a list and wrote no artifact; twicerun ignores what a step returns, so "
        "whatever it computed went nowhere (a helper that takes ctx first is a step too, "
        "unless STEPS lists the steps)"
    )
    lines = outcome.out.splitlines()
    at = lines.index("  0 _rows  not compared: no run wrote an artifact")
    assert lines[at + 1] == f"        note: {note}"
    (helper, step) = twicerun("run", path, "--runs", "2", "--json", "-").json()["steps"]
    assert helper["notes"] == [note] and step["notes"] == []
