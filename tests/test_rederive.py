"""An input a step reads that another of its inputs decides is written again from the
stressed copy, not stressed on its own (src/twicerun/runner/rederive.py)."""

from __future__ import annotations

import json

# A step reconciling orders with a control total another step wrote from them: correct,
# and it raises the moment the two disagree.
RECONCILE = """
def orders(ctx):
    ctx.write("orders", "SELECT i AS order_id, i % 300 AS cust, (i * 37) % 1000 AS cents "
                        "FROM range(20000) t(i)")


def valid(ctx):
    ctx.read("orders")
    ctx.write("valid", "SELECT * FROM orders WHERE cents > 10")


def control(ctx):
    ctx.read("valid")
    ctx.write("control", "SELECT count(*) AS n, sum(cents) AS total, max(cents) AS top FROM valid")


def reconcile(ctx):
    ctx.read("orders")
    ctx.read("control")
    (n, total, top) = ctx.sql("SELECT n, total, top FROM control").fetchone()
    got = ctx.sql(
        "SELECT count(*), sum(cents), max(cents) FROM orders WHERE cents > 10"
    ).fetchone()
    if (n, total, top) != got:
        raise ValueError(f"orders do not reconcile with control: {got} against {(n, total, top)}")
    ctx.write("by_cust", "SELECT cust, sum(cents) AS cents FROM orders GROUP BY cust")
"""


def _reconcile(result: dict) -> dict:
    return next(s for s in result["steps"] if s["name"] == "reconcile")


def test_a_control_total_written_from_an_input_is_written_again_from_its_stressed_copy(
    write_pipeline, twicerun, tmp_path, run_dir
):
    """Row multiplication doubled orders and control's one row on their own, the totals
    disagreed, and a correct reconciliation was AMPLIFICATION_FAILED, exit 5 (unseen142).
    Tie collapse, which changes values, broke it the same way. Now control is what the
    pipeline's own steps (valid, then control) make of the stressed orders."""
    path = write_pipeline(RECONCILE)
    out = tmp_path / "r.json"
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    assert run.code == 0, run.out
    step = _reconcile(json.loads(out.read_text()))
    assert step["status"] == "NO_DIVERGENCE_OBSERVED"
    clause = "control written again from the stressed orders by step 1 valid, step 2 control"
    joint = [a for a in step["amplifiers"] if a["probed_with"]]
    assert joint and all(clause in a["detail"] for a in joint)
    # Each member on its own (no joint probe without the raised thread count): row
    # multiplication and tie collapse each write control again from their own copy.
    out = tmp_path / "apart.json"
    run = twicerun(
        "run", path, "--runs", "2", "--amplify", "--without", "thread-count", "--json", out
    )
    assert run.code == 0, run.out
    step = _reconcile(json.loads(out.read_text()))
    details = {a["kind"]: a["detail"] for a in step["amplifiers"] if a["detail"]}
    assert clause in details["row multiplication"]
    assert clause in details["tie collapse"]
    assert "control" not in details["arrival order"].split(":")[0]  # reordering keeps totals
    # Nothing of the steps written again is left behind.
    invocations = [p for p in run_dir.iterdir() if p.is_dir()]
    assert invocations
    assert not [p for i in invocations for p in i.iterdir() if "derive" in p.name]


def test_an_input_that_cannot_be_written_again_is_stressed_on_its_own_and_says_why(
    write_pipeline, twicerun, tmp_path
):
    """A step of the chain that raises on the stressed rows leaves the input stressed on its
    own, as before, and the detail says so: the reconciliation fails as it used to."""
    path = write_pipeline(
        RECONCILE.replace(
            'ctx.read("valid")\n',
            'ctx.read("valid")\n    assert ctx.sql("SELECT count(*) FROM valid").fetchone()[0] < 30000\n',
        )
    )
    out = tmp_path / "r.json"
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    assert run.code == 5, run.out
    step = _reconcile(json.loads(out.read_text()))
    assert step["status"] == "AMPLIFICATION_FAILED"
    details = " ".join(a["detail"] or "" for a in step["amplifiers"])
    assert (
        "control not written again from the stressed rows (step 2 control raised on them: "
        "AssertionError"
    ) in details
    assert "so stressed on its own" in details


def test_a_failure_on_inputs_one_step_wrote_together_says_what_that_breaks(
    write_pipeline, twicerun, tmp_path
):
    """A batch and its manifest written by one step cannot be written again from anything
    stressed: nothing upstream of them is. Row multiplication doubles the batch and the
    manifest's row each on its own, and a correct check of the count raises, as before;
    the failure now says why a correct step can fail there, and how to leave it out
    (unseen143)."""
    path = write_pipeline(
        """
        def ingest(ctx):
            rel = ctx.sql("SELECT range AS id, range % 7 AS k FROM range(3000)")
            ctx.write("batch", rel)
            rel.create_view("batch_rows")
            ctx.write("manifest", "SELECT count(*) AS n FROM batch_rows")


        def validate(ctx):
            ctx.read("batch")
            ctx.read("manifest")
            (n,) = ctx.sql("SELECT n FROM manifest").fetchone()
            (got,) = ctx.sql("SELECT count(*) FROM batch").fetchone()
            if n != got:
                raise ValueError(f"batch has {got} rows, the manifest says {n}")
            ctx.write("clean", "SELECT * FROM batch")
        """
    )
    out = tmp_path / "r.json"
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    assert run.code == 5, run.out
    step = next(s for s in json.loads(out.read_text())["steps"] if s["name"] == "validate")
    failed = {a["kind"]: a["error"] for a in step["amplifiers"] if a["error"]}
    assert list(failed) == ["row multiplication"]
    assert failed["row multiplication"].endswith(
        "ValueError: batch has 6000 rows, the manifest says 3000 (step 0 ingest wrote batch and "
        "manifest together, and row multiplication changes each input on its own, so what one "
        "says of another, a count or a total, need not hold in the stressed copies: a step "
        "that checks it fails there on correct code, and --without row-multiplication leaves "
        "this amplifier out)"
    )
    assert "--without row-multiplication leaves this amplifier out)" in run.out


def test_a_step_between_that_reads_its_own_state_starts_from_the_initial_rows(
    write_pipeline, twicerun, tmp_path
):
    """The count is written by a step that also keeps a tally of its own runs in state:
    it is written again from the stressed orders with its state at the `initial` rows,
    as every amplifier's run starts. Chains through such a step were left out at first,
    and the count was stressed on its own; a state read names the step's own artifact,
    which the search for the steps in between must not follow."""
    path = write_pipeline(
        """
        def orders(ctx):
            ctx.write("orders", "SELECT range AS order_id, range % 9 AS k FROM range(3000)")


        def count(ctx):
            ctx.read("orders")
            ctx.state("tally", "SELECT 0 AS runs")
            ctx.write("tally", "SELECT runs + 1 AS runs FROM tally")
            ctx.write("order_count", "SELECT count(*) AS n FROM orders")


        def check(ctx):
            ctx.read("orders")
            ctx.read("order_count")
            (n,) = ctx.sql("SELECT n FROM order_count").fetchone()
            assert n == ctx.sql("SELECT count(*) FROM orders").fetchone()[0]
            ctx.write("ok", "SELECT k, count(*) AS n FROM orders GROUP BY k")
        """
    )
    out = tmp_path / "r.json"
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    step = next(s for s in json.loads(out.read_text())["steps"] if s["name"] == "check")
    assert step["status"] == "NO_DIVERGENCE_OBSERVED", run.out
    assert any(
        "order_count written again from the stressed orders by step 1 count" in (a["detail"] or "")
        for a in step["amplifiers"]
    )


def test_the_steps_in_between_are_found_once_each_however_many_paths_lead_through_them():
    """Steps that each read the two before them: the walk for the steps in between went
    down every path, which doubles with every step, and a run of 41 such steps under the
    amplifiers did not finish in 40 s where it takes 6 s now. Counted here in receipt
    lookups, on 25 steps."""
    from types import SimpleNamespace

    from twicerun.runner.rederive import derived_inputs

    n = 25

    def read(name):
        return SimpleNamespace(name=name, via="read")

    receipts = {0: SimpleNamespace(outcome="ok", reads=[], sources=[])}
    receipts[1] = SimpleNamespace(outcome="ok", reads=[read("a0")], sources=[])
    for i in range(2, n):
        receipts[i] = SimpleNamespace(
            outcome="ok", reads=[read(f"a{i - 1}"), read(f"a{i - 2}")], sources=[]
        )
    lookups = []

    class Records:
        def owners(self, _address):
            return {f"a{i}": (i, f"s{i}") for i in range(n)}

        def get(self, _address, index):
            lookups.append(index)
            return receipts[index]

    derived = derived_inputs(Records(), n, ["a0", f"a{n - 1}"])
    assert derived.targets == {f"a{n - 1}": (["a0"], list(range(1, n)))}
    assert len(lookups) <= 2 * n


def test_a_step_in_between_that_breaks_the_contract_on_the_stressed_rows_is_a_fallback_too(
    write_pipeline, twicerun, tmp_path
):
    """A ctx misuse that only the stressed rows provoke (a name written twice past a size)
    is what a series reports as its error; writing the input again falls back as it does
    for a raise, where it had ended the joint probe and failed each member on its own."""
    path = write_pipeline(
        RECONCILE.replace(
            '    ctx.write("control", "SELECT count(*) AS n, sum(cents) AS total, max(cents) AS top FROM valid")\n',
            '    ctx.write("control", "SELECT count(*) AS n, sum(cents) AS total, max(cents) AS top FROM valid")\n'
            '    if ctx.sql("SELECT count(*) FROM valid").fetchone()[0] > 30000:\n'
            '        ctx.write("control", "SELECT 1 AS n")\n',
        )
    )
    out = tmp_path / "r.json"
    twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    step = _reconcile(json.loads(out.read_text()))
    details = " ".join(a["detail"] or "" for a in step["amplifiers"])
    assert (
        "control not written again from the stressed rows (step 2 control could not run on them: "
        in details
    )


def test_a_count_written_from_the_files_the_step_reads_again_is_written_from_their_stressed_copy(
    write_pipeline, twicerun, tmp_path
):
    """A load check: step 0 counts the trips per month in the files, step 1 reads the same
    files again and checks its counts against step 0's. Row multiplication doubled the
    files' rows and the counts' rows each on its own, and the check raised, exit 5. Now
    the counts are written again from the stressed copy of the files, whatever name each
    step gives its view; files read another way (one fewer) are not the same rows, and
    the counts are stressed on their own as before."""
    import duckdb

    data = tmp_path / "data"
    data.mkdir()
    con = duckdb.connect()
    for m in range(1, 4):
        con.execute(
            f"COPY (SELECT i AS trip, {m} AS month, (i * 7) % 100 AS fare FROM range({m * 1000}) "
            f"t(i)) TO '{data}/m{m}.parquet'"
        )
    source = """
        FILES = [{files}]


        def counts(ctx):
            ctx.source("raw", FILES)
            ctx.write("trip_counts", "SELECT month, count(*) AS n FROM raw GROUP BY month")


        def check(ctx):
            ctx.source("trips", [{every}])
            ctx.read("trip_counts")
            (bad,) = ctx.sql(
                "SELECT count(*) FROM (SELECT month, count(*) AS n FROM trips GROUP BY month) a "
                "JOIN trip_counts b USING (month) WHERE a.n <> b.n"
            ).fetchone()
            assert bad == 0, bad
            ctx.write("ok", "SELECT month, sum(fare) AS fares FROM trips GROUP BY month")
        """
    every = ", ".join(f"'{data}/m{m}.parquet'" for m in range(1, 4))
    path = write_pipeline(source.format(files=every, every=every))
    out = tmp_path / "r.json"
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    assert run.code == 0, run.out
    step = next(s for s in json.loads(out.read_text())["steps"] if s["name"] == "check")
    assert any(
        "trip_counts written again from the stressed source trips by step 0 counts"
        in (a["detail"] or "")
        for a in step["amplifiers"]
    )
    fewer = ", ".join(f"'{data}/m{m}.parquet'" for m in range(1, 3))
    path = write_pipeline(source.format(files=fewer, every=every), "fewer.py")
    run = twicerun("run", path, "--runs", "2", "--amplify", "--json", out)
    assert run.code == 5, run.out
    assert "written again" not in run.out
