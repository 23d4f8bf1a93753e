"""Policies and `twicerun judge`: same measurements, a different verdict, nothing executed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from twicerun.findings import ArtifactFindings, ArtifactOutcome, Drift
from twicerun.judge.bound import reassociation_bound
from twicerun.judge.policy import FIRES, SAME, TOLERATED, Policy, judge_comparison

# A float sum whose terms arrive in a different order on every run at more than one thread
# (a counter picks the order; one thread adds them in one order, as DuckDB's single-threaded
# aggregate does), beside a step that loses a row on every later run. Deterministic on purpose.
PIPELINE = """
import itertools

_calls = itertools.count()


def terms(ctx):
    ctx.write("terms", "SELECT i, i % 4 AS g, (1.0 / (i + 1))::DOUBLE AS v FROM range(2000) r(i)")


def sums(ctx):
    shift = next(_calls) if ctx.threads > 1 else 0
    ctx.read("terms")
    ctx.write("totals", f"SELECT g, sum(v ORDER BY hash(i + {shift})) AS total FROM terms GROUP BY g")


def loses_a_row(ctx):
    n = 10 if next(_calls) == 1 else 9
    ctx.write("rows", f"SELECT range AS id FROM range({n})")
"""


def by_name(document):
    return {s["name"]: s for s in document["steps"]}


@pytest.fixture
def saved(write_pipeline, twicerun, run_dir):
    outcome = twicerun(
        "run", write_pipeline(PIPELINE), "--runs", "3", "--threads", "2", "--json", "-"
    )
    assert outcome.code == 1
    return outcome.json()


def test_reduction_order_tolerates_float_drift_and_nothing_else(saved, twicerun, run_dir):
    strict = by_name(saved)
    assert strict["sums"]["classes"] == ["VALUE_DRIFT"] and strict["sums"]["fired"] == 2
    judged = twicerun("judge", run_dir, "--policy", "reduction-order", "--json", "-")
    steps = by_name(judged.json())
    assert (steps["sums"]["fired"], steps["sums"]["tolerated"]) == (0, 2)
    assert steps["sums"]["status"] == "NO_DIVERGENCE_OBSERVED"
    assert steps["sums"]["classes"] == ["VALUE_DRIFT"]  # the measurement is unchanged
    assert steps["loses_a_row"]["fired"] == strict["loses_a_row"]["fired"] == 2
    assert judged.json()["policy"] == "reduction-order"
    assert judged.code == 1


def test_the_cause_line_of_a_tolerated_step_counts_what_differed_not_what_fired(
    saved, twicerun, run_dir
):
    # It said "tolerated  0 of 2 at threads=2, 0 of 2 at threads=1": the policy's verdict
    # standing in for a measurement, beside a step line that says 2 were tolerated.
    out = twicerun("judge", run_dir, "--policy", "reduction-order").out
    (line,) = [li for li in out.splitlines() if li.startswith("  1 sums") and "threads=1" in li]
    assert line.split(None, 3)[2:] == [
        "tolerated",
        "2 of 2 at threads=2 (2 tolerated), 0 of 2 at threads=1",
    ]


def test_reduction_order_does_not_tolerate_drift_that_one_thread_still_shows(
    write_pipeline, twicerun, run_dir
):
    """The order of adding is the only cause the policy forgives: drift the single-threaded
    bisect still saw on the same inputs (here the order moves whatever the thread count, as
    random() or a clock would move the values) was tolerated all the same."""
    jitter = PIPELINE.replace("next(_calls) if ctx.threads > 1 else 0", "next(_calls)")
    path = write_pipeline(jitter.split("\n\ndef loses_a_row")[0])
    measured = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-")
    assert by_name(measured.json())["sums"]["cause"] == "PERSISTS_SINGLE_THREADED"
    judged = twicerun("judge", run_dir, "--policy", "reduction-order", "--json", "-")
    sums = by_name(judged.json())["sums"]
    assert (sums["fired"], sums["tolerated"], sums["status"]) == (2, 0, "DIVERGENT")
    assert (sums["bisect"]["fired"], sums["bisect"]["tolerated"]) == (1, 0)
    assert sums["cause"] == "PERSISTS_SINGLE_THREADED"
    assert judged.code == 1
    # A manual tolerance claims no cause, so it still covers the same drift.
    manual = twicerun("judge", run_dir, "--tolerance-ulps", "1000000", "--json", "-")
    assert by_name(manual.json())["sums"]["tolerated"] == 2
    assert manual.code == 0
    # Counted as the evidence counts them ("drift up to 1,000,000 ulp" before).
    header = twicerun("judge", run_dir, "--tolerance-ulps", "1000000").out
    assert "; also tolerated: drift up to 1,000,000 ulps\n" in header
    # The report's bound section says the bound does not speak for this drift.
    assert (
        "      one thread on the same inputs still differed, so the order of adding does not "
        "explain this drift, inside the bound or not\n"
    ) in twicerun("judge", run_dir).out


def test_judge_changes_verdicts_and_no_measurement(saved, twicerun, run_dir):
    judged = twicerun("judge", run_dir, "--policy", "reduction-order", "--json", "-").json()
    for before, after in zip(saved["steps"], judged["steps"], strict=True):
        assert [[a["findings"] for a in c["artifacts"]] for c in before["comparisons"]] == [
            [a["findings"] for a in c["artifacts"]] for c in after["comparisons"]
        ]


def test_judge_reuses_recorded_findings_and_executes_nothing(saved, twicerun, run_dir, monkeypatch):
    from twicerun.runner import loop, rescore

    def refuse(*args, **kwargs):
        raise AssertionError("judge measured again")

    monkeypatch.setattr(rescore, "compare_artifacts", refuse)
    monkeypatch.setattr(loop, "execute_step", refuse)
    assert twicerun("judge", run_dir, "--policy", "reduction-order").code == 1


def _strip_findings(saved, runs) -> None:
    path = Path(saved["artifacts"]) / "result.json"
    document = json.loads(path.read_text())
    for step in document["steps"]:
        for comparison in step["comparisons"]:
            if comparison["run"] in runs:
                for artifact in comparison["artifacts"]:
                    artifact["findings"] = None
    path.write_text(json.dumps(document))


def test_judge_measures_a_pair_whose_findings_are_missing(write_pipeline, twicerun, run_dir):
    outcome = twicerun(
        "run", write_pipeline(PIPELINE), "--runs", "3", "--keep-copies", "--json", "-"
    )
    _strip_findings(outcome.json(), runs={3})  # run 3's differing copies were kept
    judged = by_name(twicerun("judge", run_dir, "--json", "-").json())
    assert judged["sums"]["classes"] == ["VALUE_DRIFT"]
    assert judged["loses_a_row"]["classes"] == ["ROW_MISSING"]


def test_judge_refuses_to_measure_a_copy_that_was_deleted(saved, twicerun, run_dir):
    _strip_findings(saved, runs={2})
    outcome = twicerun("judge", run_dir)
    assert outcome.code == 2
    assert "its copy was deleted once its findings were recorded" in outcome.err


def test_judge_of_a_pair_whose_receipt_has_a_wrong_type_says_so_not_crashes(
    write_pipeline, twicerun, run_dir
):
    """Receipts are read against their types: one edited by hand is refused in a sentence
    where judge must follow it to measure a pair, not an internal error."""
    outcome = twicerun(
        "run", write_pipeline(PIPELINE), "--runs", "3", "--keep-copies", "--json", "-"
    )
    _strip_findings(outcome.json(), runs={3})
    (receipt,) = Path(outcome.json()["artifacts"]).glob("loop/3/*sums/receipt.json")
    receipt.write_text(receipt.read_text().replace('"threads": 2', '"threads": "2"'))
    judged = twicerun("judge", run_dir)
    assert judged.code == 2, judged.err
    assert "the receipt in " in judged.err and 'Receipt.threads: "2" is not int' in judged.err
    assert "internal error" not in judged.err


def test_a_manual_tolerance_works_under_strict_and_never_sets_exit_1(write_pipeline, twicerun):
    path = write_pipeline(PIPELINE.split("\n\ndef loses_a_row")[0])
    outcome = twicerun("run", path, "--runs", "3", "--tolerance-ulps", "1000000", "--json", "-")
    step = by_name(outcome.json())["sums"]
    assert (step["fired"], step["tolerated"]) == (0, 2)
    assert outcome.code == 0


def test_the_report_prints_the_bound_at_both_term_counts(saved, twicerun, run_dir):
    out = twicerun("judge", run_dir, "--policy", "reduction-order").out
    assert "n = 2,000 rows read, bound " in out
    assert "n = 500 terms per output value, bound " in out
    assert "(2 tolerated)" in out


def test_judge_of_a_directory_without_a_completed_invocation_is_bad_input(tmp_path, twicerun):
    (tmp_path / "empty").mkdir()
    outcome = twicerun("judge", tmp_path / "empty")
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {tmp_path / 'empty'} holds no completed invocation to judge; "
        f"run `twicerun run PIPELINE` first\n"
    )


def test_judge_of_an_invocation_keep_removed_says_so_and_of_a_typo_does_not(
    write_pipeline, twicerun, run_dir
):
    # Both were click's "Directory ... does not exist." before.
    path = write_pipeline("def one(ctx):\n    ctx.write('one', 'SELECT 1 AS x')\n")
    twicerun("run", path, "--runs", "2")
    (gone,) = [p for p in run_dir.iterdir() if (p / "invocation.json").is_file()]
    twicerun("run", path, "--runs", "2")
    outcome = twicerun("judge", gone)
    assert outcome.code == 2
    assert outcome.err.startswith(
        f"twicerun: {gone} does not exist: a later `twicerun run` of the same pipeline in the "
        f"same run directory removed it when it completed"
    )
    typo = run_dir / "20200101-000000-abcd"
    outcome = twicerun("judge", typo)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {typo} does not exist; give an invocation or run directory\n"
    )
    # Click refused a file as "Directory ... is a file", and said nothing of what to give.
    (invocation,) = [p for p in run_dir.iterdir() if (p / "invocation.json").is_file()]
    outcome = twicerun("judge", invocation / "result.json")
    assert (outcome.code, outcome.err) == (
        2,
        f"twicerun: {invocation / 'result.json'} is a file of the invocation {invocation}; "
        f"give {invocation}\n",
    )
    outcome = twicerun("judge", path)
    assert (outcome.code, outcome.err) == (
        2,
        f"twicerun: {path} is a file, not an invocation or run directory; give the directory "
        f"`twicerun run` printed; to run the pipeline, `twicerun run {path}`\n",
    )


def test_judge_of_a_directory_of_failed_invocations_says_they_are_there(
    write_pipeline, twicerun, run_dir
):
    # It said only "holds no completed invocation", beside a directory the run had just
    # said it kept.
    path = write_pipeline('def a(ctx):\n    raise RuntimeError("boom")\n')
    assert twicerun("run", path, "--runs", "2").code == 3
    outcome = twicerun("judge", run_dir)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {run_dir} holds no completed invocation to judge (1 invocation there did "
        f"not complete, and only a completed one has a Result); run `twicerun run PIPELINE` "
        f"first\n"
    )


def drift_findings(relative, ulps=3, incomparable=0, classes=("VALUE_DRIFT",)):
    drift = Drift("x", "double", "rows", 1, 10, ulps, relative, 1.0, 1.0, incomparable)
    return ArtifactFindings("t", "both", list(classes), 10, 10, ["k"], drift=[drift])


def measured(name: str, findings: ArtifactFindings) -> ArtifactOutcome:
    """An artifact that differed and that the oracle measured."""
    return ArtifactOutcome(name, "both", "oracle", True, findings=findings)


@pytest.mark.parametrize(
    ("policy", "findings", "verdict"),
    [
        (Policy("strict"), drift_findings(1e-15), FIRES),
        (Policy("reduction-order"), drift_findings(1e-15), TOLERATED),
        (Policy("reduction-order"), drift_findings(1e-3), FIRES),
        (Policy("reduction-order"), drift_findings(1e-15, incomparable=1), FIRES),
        (
            Policy("reduction-order"),
            drift_findings(1e-15, classes=("ROW_MISSING", "VALUE_DRIFT")),
            FIRES,
        ),
        (Policy("strict", tolerance_rel=1e-12), drift_findings(1e-15), TOLERATED),
        (Policy("strict", tolerance_ulps=2), drift_findings(1e-15, ulps=3), FIRES),
        (
            Policy("strict", tolerance_rel=1e-12, tolerance_ulps=2),
            drift_findings(1e-15, ulps=3),
            FIRES,
        ),
    ],
)
def test_policy_verdicts(policy, findings, verdict):
    assert judge_comparison([measured("t", findings)], 1000, policy) == verdict


def test_reduction_order_tolerates_no_float_that_only_changed_places():
    """A list whose floats came back in another order, and rows handed each other's floats,
    moved no sum: close values (a few ulps apart) were tolerated as reassociation."""
    reordered = drift_findings(1e-15)
    reordered = ArtifactFindings(
        "t", "both", ["VALUE_DRIFT"], 10, 10, ["k"],
        drift=[Drift("x[]", "double", "values", 2, 10, 3, 1e-15, 1.0, 1.0, lists_moved=1,
                     lists_reordered=1)],
    )  # fmt: skip
    handed = ArtifactFindings(
        "t", "both", ["VALUE_DRIFT"], 10, 10, ["k", "rn"],
        drift=drift_findings(1e-15).drift, reassigned=["rn"],
    )  # fmt: skip
    for findings in (reordered, handed):
        assert judge_comparison([measured("t", findings)], 1000, Policy("reduction-order")) == FIRES
        # A manual tolerance claims no cause, so it still covers them.
        manual = Policy("strict", tolerance_rel=1e-12)
        assert judge_comparison([measured("t", findings)], 1000, manual) == TOLERATED


CHANGED_PLACES = """
import itertools

_calls = itertools.count()


def terms(ctx):
    # Floats that differ from each other in their last bits, and sum to a drifting total.
    ctx.write("terms", "SELECT i, i % 4 AS g, 1.0 + (i % 8) * 2.220446049250313e-16 AS v, "
                       "(1.0 / (i + 1))::DOUBLE AS w FROM range(2000) r(i)")


def sums(ctx):
    shift = next(_calls) if ctx.threads > 1 else 0
    ctx.read("terms")
    ctx.write("totals", f"SELECT g, sum(w ORDER BY hash(i + {shift})) AS total FROM terms GROUP BY g")


def numbered(ctx):
    shift = next(_calls) if ctx.threads > 1 else 0
    ctx.read("terms")
    ctx.write("numbered", f"SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY hash(i + {shift})) AS rn FROM terms")


def listed(ctx):
    shift = next(_calls) if ctx.threads > 1 else 0
    ctx.read("terms")
    ctx.write("lists", f"SELECT g, list(v ORDER BY hash(i + {shift})) AS vs FROM terms GROUP BY g")
"""


def test_reduction_order_fires_on_floats_that_changed_places_inside_the_bound(
    write_pipeline, twicerun
):
    path = write_pipeline(CHANGED_PLACES)
    outcome = twicerun(
        "run", path, "--runs", "3", "--threads", "2", "--no-amplify", "--policy",
        "reduction-order", "--json", "-",
    )  # fmt: skip
    steps = by_name(outcome.json())
    assert (steps["sums"]["fired"], steps["sums"]["tolerated"]) == (0, 2)
    for name in ("numbered", "listed"):
        assert (steps[name]["fired"], steps[name]["tolerated"], steps[name]["status"]) == (
            2, 0, "DIVERGENT",
        )  # fmt: skip
        assert steps[name]["cause"] == "PARALLEL_ORDER"
    assert outcome.code == 1
    (numbered,) = steps["numbered"]["comparisons"][0]["artifacts"]
    assert numbered["findings"]["reassigned"] == ["rn"]


def test_a_pair_with_nothing_found_in_its_compared_columns_is_the_same():
    empty = ArtifactFindings("t", "both", [], 10, 10, ["k"], not_compared=["surrogate"])
    assert judge_comparison([measured("t", empty)], 10, Policy()) == SAME


def test_the_bound_is_twice_gamma_n():
    u = 2.0**-53
    for n in (1, 2, 1000, 2_000_000):
        assert reassociation_bound(n, "double") == pytest.approx(2 * n * u / (1 - n * u), rel=1e-12)
    assert math.isinf(reassociation_bound(2**53, "double"))


def test_an_artifact_with_no_exact_column_says_it_was_matched_on_no_key(write_pipeline, twicerun):
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def floats_only(ctx):
            shift = next(_calls)
            ctx.write("x", f"SELECT sum(v ORDER BY hash(i + {shift})) AS total "
                           f"FROM (SELECT i, (1.0 / (i + 1))::DOUBLE AS v FROM range(3000) r(i))")
        """
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 1
    assert (
        "x: matched on no key: it has no exact column, so rows were paired by their float "
        "values alone" in outcome.out
    )


@pytest.mark.parametrize(
    "written, retyped, paired",
    [
        # A count read back from a file that was absent in run 1 came back BIGINT where
        # run 1 wrote INTEGER: the key is the exact columns both sides share, none here,
        # and the report said the artifact had no exact column.
        (
            "3::{cast} AS n, (1.0 / (3 + {width}))::DOUBLE AS s",
            "n from INTEGER to BIGINT",
            "rows were paired by their float values alone",
        ),
        # Its only column retyped and no float: the report said rows were paired by their
        # float values, of which there were none.
        (
            "7::{cast} AS n",
            "n from INTEGER to BIGINT",
            "no value was compared, only how many rows each run wrote",
        ),
    ],
)
def test_an_exact_column_retyped_is_not_said_to_be_missing(
    write_pipeline, twicerun, written, retyped, paired
):
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def counted(ctx):
            cast = "INTEGER" if next(_calls) == 0 else "BIGINT"
            width = len(cast)
            ctx.write("x", f"SELECT WRITTEN")
        """.replace("WRITTEN", written)
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 1
    assert f"x: schema changed: retyped {retyped}\n" in outcome.out
    assert (
        f"x: matched on no key: no exact column kept its name and type in both runs, so "
        f"{paired}\n" in outcome.out
    )
    assert "it has no exact column" not in outcome.out


def test_judge_does_not_report_the_runs_retention_as_its_own(write_pipeline, twicerun, run_dir):
    # The report judge printed ended "Removed 1 older invocation directory (--keep).",
    # copied from the run's Result, though judge executes and removes nothing.
    path = write_pipeline("def one(ctx):\n    ctx.write('one', 'SELECT 1 AS x')\n")
    twicerun("run", path, "--runs", "2", "--no-amplify")
    ran = twicerun("run", path, "--runs", "2", "--no-amplify")
    assert "Removed 1 older invocation directory (--keep).\n" in ran.out
    judged = twicerun("judge", run_dir)
    assert judged.code == 0
    assert "Removed" not in judged.out and "kept beside this one" not in judged.out
    assert judged.out.splitlines()[-2].startswith("0 of 1 step diverged")
    # The re-scored document still records what the run's retention did.
    assert len(twicerun("judge", run_dir, "--json", "-").json()["pruned"]) == 1


def test_a_window_sum_has_no_average_term_count_to_be_outside_of():
    """A running total writes a row per row read, so rows read over output rows is 1, and
    the report printed "n = 1 terms per output value, ..., OUTSIDE" under a deciding line
    that said inside, of a sum that added up to a million terms per value."""
    from twicerun.judge.bound import figures
    from twicerun.render.evidence import bound_lines
    from twicerun.result import StepResult

    def lines(output_rows: int) -> list[str]:
        b = figures("running", "total", "double", 1.02e-14, 1_000_000, output_rows)
        return bound_lines(StepResult(1, "running", 1, 4, 4, None, bounds=[b]))

    window = lines(1_000_000)
    assert window[1].endswith(", inside") and window[1].startswith("    n = 1,000,000 rows read")
    assert window[2] == (
        "    terms per output value: none to average, since running has as many rows as the "
        "step read or more (a window, or a value per row)"
    )
    assert "OUTSIDE" not in "\n".join(window)
    grouped = lines(50)
    assert grouped[2].startswith("    n = 20,000 terms per output value, bound ")


def test_a_wide_artifact_describes_five_moved_columns_and_counts_the_rest_on_one_line():
    """A feature table of 400 float columns that drifted printed two lines per column,
    800 lines under one step, and three more per column in the bound section."""
    from twicerun.findings import ArtifactFindings, Drift
    from twicerun.judge.bound import figures
    from twicerun.render.evidence import bound_lines, step_evidence
    from twicerun.result import ArtifactOutcome, Comparison, StepResult
    from twicerun.vocabulary.loop import Difference, Presence, SettledBy

    def drift(k: int) -> Drift:
        return Drift(
            column=f"s{k}", type="DOUBLE", unit="rows", moved=40 + k, compared=50,
            max_ulps=k + 1, max_relative=(k + 1) * 1e-16, reference_value=1.5,
            later_value=1.5000000000000002, shown_relative=(k + 1) * 1e-16,
        )  # fmt: skip

    findings = ArtifactFindings(
        artifact="sums", presence=Presence.BOTH, classes=[Difference.VALUE_DRIFT],
        reference_rows=50, later_rows=50, key=["g"], paired=50,
        drift=[drift(k) for k in range(12)],
    )  # fmt: skip
    outcome = ArtifactOutcome(
        name="sums", presence=Presence.BOTH, settled_by=SettledBy.ORACLE, differs=True,
        reference_rows=50, later_rows=50, findings=findings,
    )  # fmt: skip
    step = StepResult(
        1, "agg", 1, 1, 1, None, comparisons=[Comparison(run=2, fired=True, artifacts=[outcome])],
        bounds=[figures("sums", f"s{k}", "double", (k + 1) * 1e-16, 400_000, 50) for k in range(12)]
        + [figures("sums", "spread", "double", 1e-3, 400_000, 50)],
    )  # fmt: skip
    lines = step_evidence(step)
    assert len(lines) == 11
    assert (
        lines[-2]
        == "furthest move in this comparison: s4, 5 ulps and 5e-16 relative, 1.5 against 1.5000000000000002"
    )
    assert lines[-1] == (
        "sums: 7 more columns moved too (s5, s6, s7 and 4 more); the furthest move among them "
        "in this comparison: s11, 12 ulps and 1.2e-15 relative"
    )
    bounds = bound_lines(step)
    # The column outside the bound is among those shown, though it is the last one written.
    assert bounds[0] == "1 agg, sums.spread: observed 0.001"
    assert bounds[-1] == (
        "1 agg: 8 more columns, every one inside at the rows-read n; the least headroom "
        "74,015x, on sums.s11"
    )
    assert len(bounds) == 5 * 3 + 1


def test_the_furthest_move_says_when_another_pair_moved_further_in_relative_terms():
    """The furthest move is the pair with the most ulps, and the bound's observed figure is
    the largest relative move, which can be another pair's: a running total over tied days
    showed 'observed 2' under the bound and '1.67 relative' as its furthest move, and
    neither said which was which."""
    from twicerun.judge.bound import figures
    from twicerun.render.evidence import bound_lines, step_evidence
    from twicerun.result import Comparison, StepResult
    from twicerun.vocabulary.loop import Difference, Presence, SettledBy

    def step(max_relative: float) -> StepResult:
        d = Drift(
            column="total", type="double", unit="rows", moved=3, compared=10, max_ulps=9000,
            max_relative=max_relative, reference_value=3.0, later_value=18.0,
            shown_relative=5 / 6,
        )  # fmt: skip
        findings = ArtifactFindings(
            artifact="t", presence=Presence.BOTH, classes=[Difference.VALUE_DRIFT],
            reference_rows=10, later_rows=10, key=["day"], paired=10, drift=[d],
        )  # fmt: skip
        outcome = ArtifactOutcome(
            name="t", presence=Presence.BOTH, settled_by=SettledBy.ORACLE, differs=True,
            reference_rows=10, later_rows=10, findings=findings,
        )  # fmt: skip
        return StepResult(
            1, "running", 1, 1, 1, None,
            comparisons=[Comparison(run=2, fired=True, artifacts=[outcome])],
            bounds=[figures("t", "total", "double", max_relative, 10, 10)],
        )  # fmt: skip

    further = step(2.0)
    (furthest,) = [line for line in step_evidence(further) if line.startswith("furthest")]
    assert furthest == (
        "furthest move in this comparison: total, 9,000 ulps and 0.833 relative, 3.0 against "
        "18.0; another pair moved further in relative terms, 2"
    )
    assert bound_lines(further)[0] == "1 running, t.total: observed 2"
    (same,) = [line for line in step_evidence(step(5 / 6)) if line.startswith("furthest")]
    assert same.endswith("3.0 against 18.0")
