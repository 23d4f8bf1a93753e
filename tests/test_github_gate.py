"""The gate's decisions, its escaping, its annotations and its outputs."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from twicerun.github.baseline import Baseline, Settings, StepRecord, build, measure_alike
from twicerun.github.commands import (
    Annotation,
    commands,
    escape_data,
    escape_property,
    write_outputs,
)
from twicerun.github.decision import (
    StepTrial,
    coin_power,
    confirm_test,
    decide_pipeline,
    default_trials,
    needed_trials,
    score,
    trials_for_power,
)
from twicerun.github.gate import GateOptions, evaluate, is_regression
from twicerun.github.sarif import sarif
from twicerun.github.summary import comment_body
from twicerun.result import ArtifactOutcome, Comparison, Environment, Result, Series, StepResult
from twicerun.vocabulary.gate import (
    FIXED,
    MEASURED_OTHERWISE,
    NEW,
    NEW_CAUSE,
    NEW_KIND,
    NEW_REACH,
    NOT_CONFIRMED,
    ONE_THREAD_UP,
    PIPELINE_ADDED,
    PIPELINE_MISSING,
    RATE_DOWN,
    RATE_UP,
    ROWS_UP,
    STEP_ADDED,
    STEP_REMOVED,
    STEP_RENAMED,
    UNCHANGED,
)

ENV = Environment("2.0.1", 2, "Linux-x86_64", "3.11.7", "0.1.0")
P = "pipelines/p.py"
STEADY = (0, 0, 0, 0, 0)
SPLIT = (0, 1, 0, 1, 1)  # two answers, 3 against 2
NOISY = (0, 1, 2, 3, 4)  # a new answer on every run


def step(name: str, index: int, answers=STEADY, stress=(0, 0)) -> StepResult:
    """A step as the loop records it: run 1 is answers[0]; later runs compared with it."""
    comparisons = [
        Comparison(
            run=run,
            fired=a != answers[0],
            artifacts=[ArtifactOutcome(name, "both", "bytes", a != answers[0])],
            answer=f"answer-{a}" if a != answers[0] else "",
        )
        for run, a in enumerate(answers[1:], start=2)
    ]
    fired = sum(c.fired for c in comparisons)
    amplifiers = (
        [Series(kind="thread count", threads=4, fired=stress[0], compared=stress[1])]
        if stress[1]
        else []
    )
    return StepResult(
        index=index,
        name=name,
        line=10 * index + 1,
        fired=fired,
        compared=len(comparisons),
        status="DIVERGENT" if fired else "NO_DIVERGENCE_OBSERVED",
        file=P,
        comparisons=comparisons,
        amplifiers=amplifiers,
    )


def result(*steps: tuple, env: Environment = ENV, runs: int = 5, pipeline: str = P) -> Result:
    return Result(
        pipeline=pipeline,
        runs=runs,
        contained=True,
        policy="strict",
        environment=env,
        seconds=1.0,
        steps=[step(name, i, *rest) for i, (name, *rest) in enumerate(steps)],
    )


def baseline_of(trials: list[Result], pipeline: str = P) -> Baseline:
    return build([{pipeline: t} for t in trials], "twicerun baseline update")


def never_rerun(key: str) -> Result:
    raise AssertionError(f"{key} was re-run although no step was suspect")


def rerun_with(*results: Result):
    queue = list(results)
    calls = []

    def rerun(key: str) -> Result:
        calls.append(key)
        return queue.pop(0)

    rerun.calls = calls  # type: ignore[attr-defined]
    return rerun


def verdicts(gate) -> dict[str, str]:
    return {d.name: d.verdict for d in gate.decisions}


# The score --------------------------------------------------------------------------


def test_a_rare_answer_counts_the_same_whichever_run_it_lands_on():
    # The old test counted comparisons with run 1: a rare answer on run 1 fired all
    # four, one on run 3 fired one. A trial's score is symmetric in its runs.
    assert score(StepTrial((1, 0, 0, 0, 0))) == score(StepTrial((0, 0, 1, 0, 0))) == 4
    assert score(StepTrial(SPLIT)) == 6
    assert score(StepTrial(NOISY)) == 10
    assert score(StepTrial(STEADY)) == 0


def test_disagreement_on_the_real_input_outranks_any_found_only_under_stress():
    assert 0 < score(StepTrial(STEADY, 8, 8)) < 1 <= score(StepTrial((0, 0, 0, 0, 1)))


def test_two_later_runs_that_wrote_the_same_rows_share_an_answer():
    record = StepRecord.of(step("a", 0, (0, 7, 7, 0, 3)))
    assert record.answers == (0, 1, 1, 0, 2)
    assert record.fired == 3


# The decision ------------------------------------------------------------------------


def test_the_same_behaviour_is_unchanged_and_nothing_is_re_run():
    trials = [result(("a", STEADY), ("b", NOISY)) for _ in range(19)]
    gate = evaluate(
        {P: result(("a", STEADY), ("b", NOISY))}, baseline_of(trials), rerun=never_rerun
    )
    assert verdicts(gate) == {"a": UNCHANGED, "b": UNCHANGED}
    assert gate.regressions == [] and gate.confirmations == []


def test_a_steady_step_that_now_differs_is_re_run_and_fails_when_the_re_runs_agree():
    trials = [result(("a", STEADY), ("b", STEADY)) for _ in range(19)]
    worse = result(("a", SPLIT), ("b", STEADY))
    rerun = rerun_with(worse, worse, worse)
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun)
    (decision,) = [d for d in gate.decisions if d.name == "a"]
    assert decision.verdict == NEW
    assert decision.confirm_fired == [3, 3, 3]
    assert decision.p_value == pytest.approx(1 / math.comb(22, 3))
    assert is_regression(decision, ("new",))
    assert rerun.calls == [P, P, P]
    assert [c.trials for c in gate.confirmations] == [3]


def test_a_suspect_step_whose_re_runs_are_steady_does_not_fail_the_check():
    trials = [result(("a", STEADY)) for _ in range(19)]
    steady = result(("a", STEADY))
    gate = evaluate(
        {P: result(("a", SPLIT))}, baseline_of(trials), rerun=rerun_with(steady, steady, steady)
    )
    assert verdicts(gate) == {"a": NOT_CONFIRMED}
    assert gate.regressions == []


def test_a_step_that_differs_far_more_often_is_rate_up():
    rare = (0, 0, 0, 0, 1)
    trials = [result(("a", rare if i % 4 == 0 else STEADY)) for i in range(20)]
    noisy = result(("a", NOISY))
    gate = evaluate({P: noisy}, baseline_of(trials), rerun=rerun_with(noisy, noisy, noisy))
    assert verdicts(gate) == {"a": RATE_UP}
    assert gate.regressions


def test_a_rate_up_that_every_comparison_already_showed_names_the_answers_that_moved():
    """The score counts pairs of runs with different answers. A step whose first run in a
    process was the odd one out (4 of 4 comparisons, one pair of answers apart from the
    rest) that now gives a new answer on every run failed as "rate up, differed in 19 of
    19 trials on the baseline, 4 of 4 now": every figure shown was unchanged."""
    odd_first = (0, 1, 1, 1, 1)
    trials = [result(("a", odd_first)) for _ in range(19)]
    noisy = result(("a", NOISY))
    gate = evaluate({P: noisy}, baseline_of(trials), rerun=rerun_with(noisy, noisy, noisy))
    assert verdicts(gate) == {"a": RATE_UP}
    clause = (
        "pairs of runs with different answers: 10 of 10 now, then 10, 10, 10 on re-runs, "
        "against 4 in every baseline trial"
    )
    body = comment_body(gate, "pipelines/*.py")
    (line,) = [x for x in body.splitlines() if x.startswith("- `a`")]
    assert line == (
        f"- `a` in `{P}`: rate up, differed in 19 of 19 trials on the baseline, 4 of 4 now, "
        f"then 4, 4, 4 on re-runs; {clause}, p < 0.001"
    )
    (annotation,) = [a for a in gate.annotations if a.title.startswith("twicerun: a")]
    assert clause in annotation.message
    # Better the same way: the answers narrowed, the comparisons did not.
    trials = [result(("a", NOISY if i % 2 else (0, 1, 2, 3, 3))) for i in range(19)]
    gate = evaluate({P: result(("a", odd_first))}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": RATE_DOWN}
    assert "4 of 10 now, against 9 to 10 on the baseline, median 9" in comment_body(gate, P)


def test_a_suspect_that_was_not_confirmed_names_the_answers_that_made_it_suspect():
    """On a baseline where a step differed in every trial, a trial whose comparisons were
    no more (3 of 4) is suspect when it gave a third answer. The list said only "suspect,
    not confirmed, differed in 19 of 19 trials on the baseline, 3 of 4 now, then ...": no
    figure shown was out of the ordinary, and the reader could not tell why it was re-run."""
    trials = [result(("a", SPLIT)) for _ in range(19)]
    three = (0, 0, 1, 2, 2)  # 3 of 4 comparisons, as in SPLIT; 8 pairs apart, not 6
    gate = evaluate(
        {P: result(("a", three))},
        baseline_of(trials),
        rerun=rerun_with(*[result(("a", SPLIT))] * 3),
    )
    assert verdicts(gate) == {"a": NOT_CONFIRMED}
    body = comment_body(gate, P)
    (line,) = [x for x in body.splitlines() if x.startswith("- `a`")]
    assert line == (
        f"- `a` in `{P}`: suspect, not confirmed, differed in 19 of 19 trials on the "
        "baseline, 3 of 4 now, then 3, 3, 3 on re-runs; pairs of runs with different "
        "answers: 8 of 10 now, then 6, 6, 6 on re-runs, against 6 in every baseline trial, "
        "p = 1"
    )
    # A re-run quiet in the loop and differing only under the amplifiers is scored by
    # their fraction; no two of its runs gave different answers, and it says 0 of them.
    stressed = result(("a", STEADY, (1, 2)))
    gate = evaluate(
        {P: result(("a", three))},
        baseline_of(trials),
        rerun=rerun_with(result(("a", SPLIT)), stressed, result(("a", SPLIT))),
    )
    assert verdicts(gate) == {"a": NOT_CONFIRMED}
    (line,) = [x for x in comment_body(gate, P).splitlines() if x.startswith("- `a`")]
    assert "pairs of runs with different answers: 8 of 10 now, then 6, 0, 6 on re-runs" in line
    # Where the baseline never differed, its comparisons say it all: nothing is added.
    trials = [result(("a", STEADY)) for _ in range(19)]
    steady = result(("a", STEADY))
    gate = evaluate(
        {P: result(("a", SPLIT))}, baseline_of(trials), rerun=rerun_with(steady, steady, steady)
    )
    (line,) = [x for x in comment_body(gate, P).splitlines() if x.startswith("- `a`")]
    assert "pairs of runs" not in line


def test_floats_moving_past_the_bound_are_tested_only_against_a_baseline_that_recorded_it():
    """A step drifting inside the reassociation bound on every baseline trial now drifts past
    it: `drifts past the bound now`. A baseline written before the statistic existed has no
    such figure to compare with, and reading its trials as 0 would fail every step that had
    always drifted past the bound: there the statistic is not tested at all."""
    import json
    from dataclasses import replace

    from twicerun.findings import BoundFigures
    from twicerun.github.baseline import parse

    past = BoundFigures("a", "v", "DOUBLE", 1.0, 10, 4e-15, None, False, 1, 4e-16, None, False)

    def outside(r: Result) -> Result:
        return replace(r, steps=[replace(s, bounds=[past]) for s in r.steps])

    recorded = baseline_of([result(("a", NOISY)) for _ in range(19)])
    fresh = outside(result(("a", NOISY)))
    gate = evaluate({P: fresh}, recorded, rerun=rerun_with(fresh, fresh, fresh))
    assert verdicts(gate) == {"a": NEW_REACH}
    assert gate.decisions[0].outside_bound_by_trial == [0] * 19 + [1, 1, 1, 1]

    data = json.loads(recorded.to_json())
    data["pipelines"][P]["digest"] = "0" * 64  # the test's Results carry none
    for trial in data["trials"]:
        for record in trial["pipelines"][P].values():
            del record["outside_bound"]
    older = parse(json.dumps(data), "baseline.json", "twicerun baseline update")
    gate = evaluate({P: fresh}, older, rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED}


def test_a_quiet_step_whose_amplified_floats_now_move_past_the_bound_is_caught():
    """A step the loop finds quiet is scored by its amplifiers, which are all the evidence
    it has: a float sum drifting inside the bound under them, that a pull request makes
    first(), fires as often as before. The fourth statistic looked at the loop alone."""
    from dataclasses import replace

    def under_stress(outside: bool) -> Result:
        r = result(("a", STEADY, (2, 2)))
        (s,) = r.steps
        (amplified,) = s.amplifiers
        return replace(
            r, steps=[replace(s, amplifiers=[replace(amplified, outside_bound=outside)])]
        )

    recorded = baseline_of([under_stress(False) for _ in range(19)])
    fresh = under_stress(True)
    assert fresh.steps[0].outside_bound and not recorded.records(P, "a")[0].outside_bound
    gate = evaluate({P: fresh}, recorded, rerun=rerun_with(fresh, fresh, fresh))
    assert verdicts(gate) == {"a": NEW_REACH}


def classed(r: Result, *classes: str) -> Result:
    """`r` with every step's loop classes set, as the oracle would have found them."""
    from dataclasses import replace

    return replace(r, steps=[replace(s, classes=list(classes)) for s in r.steps])


# Scores of one step in 19 baseline trials and 3 fresh ones, for the restating rule.
RESTATED_HISTORY = [6, 0, 0, 6, 10, 0, 4, 0, 0, 0, 0, 0, 6, 4, 0, 0, 6, 0, 0]
RESTATED_FRESH = [0, 4, 10]


def score_p(statistic: str, history: list[float] | None = None, implied=None) -> float:
    """Step `a`'s p-value with a 0/1 statistic beside it in the family (or, with `statistic`
    empty, alone). `history` is its baseline trials (default: 1 exactly when the score is
    above 0); in the fresh trials it is 1 exactly when the score is."""
    key = f"a\0{statistic}"
    keys = ["a", key] if statistic else ["a"]
    base = {"a": RESTATED_HISTORY, key: history or [1.0 if x else 0.0 for x in RESTATED_HISTORY]}
    trials = iter([{"a": x, key: 1.0 if x else 0.0} for x in RESTATED_FRESH])
    outcomes, _ = decide_pipeline(
        {k: base[k] for k in keys},
        {k: {"a": 10, key: 1.0}[k] for k in keys},
        trials.__next__,
        level=0.05,
        implied=implied,
    )
    return outcomes["a"].p


def test_a_rows_statistic_that_only_restates_the_score_costs_the_family_nothing():
    # For a step whose every difference is in rows, its rows statistic is 1 exactly when
    # its score is above 0. Kept in the family, it made the min-p adjustment stricter, and
    # the calibration caught fewer steps whose rate went up; it is left out of stage 2.
    implied = {"a\0rows": "a"}
    assert score_p("rows", implied=implied) == score_p("") < score_p("rows")
    # One baseline trial in which the step differed in floats alone: the rows statistic
    # says something the score does not, and stays in the family.
    rows = [1.0 if x else 0.0 for x in RESTATED_HISTORY]
    rows[0] = 0.0
    assert score_p("rows", rows, implied=implied) == score_p("rows", rows)


def caused(r: Result, cause: str) -> Result:
    """`r` with every step's cause set, as the bisect at one thread would have found it."""
    from dataclasses import replace

    return replace(r, steps=[replace(s, cause=cause) for s in r.steps])


def drifting(*classes: str, cause: str = "PARALLEL_ORDER") -> Result:
    """A step with a new answer on every run: its score is as high as it goes."""
    return caused(classed(result(("a", NOISY)), "VALUE_DRIFT", *classes), cause)


KINDS = {
    # A step that now loses rows where it only drifted.
    "rows": (
        drifting("ROW_MISSING", "ROW_EXTRA"),
        drifting("ROW_MISSING"),
        NEW_KIND,
        ROWS_UP,
        "its runs lost, added or repeated rows, or changed columns,",
        "trials whose runs lost, added or repeated rows",
        "rows_by_trial",
    ),
    # A float sum that drifted by thread order, now also drawing random(): still differs
    # when re-executed at one thread.
    "one-thread": (
        drifting(cause="PERSISTS_SINGLE_THREADED"),
        drifting(cause="PERSISTS_SINGLE_THREADED"),
        NEW_CAUSE,
        ONE_THREAD_UP,
        "it still differed when re-executed at one thread,",
        "trials in which it still differed at one thread",
        "one_thread_by_trial",
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_step_that_drifted_on_every_trial_and_changes_kind_is_caught(kind):
    # Its answers spread as far as they can on the baseline already, so its score could
    # not rise, and the check passed it as `unchanged`: the kind of its differences is
    # tested beside the score, each as a 0/1 statistic per trial.
    worse, sometimes, new, up, said, chart, field = KINDS[kind]
    trials = [drifting() for _ in range(19)]
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    (decision,) = gate.decisions
    assert decision.verdict == new
    assert decision.p_value == pytest.approx(1 / math.comb(22, 3))
    evidence = f"{said} in 0 of 19 trials on the baseline, and in 4 of 4 now"
    assert decision.evidence[0] == evidence
    assert gate.regressions == [decision] and is_regression(decision, ("new",))
    assert not is_regression(decision, ("rate-up",))
    # Its chart draws the trials that showed it: bars of its comparisons are all at 4.
    assert getattr(decision, field) == [0] * 19 + [1, 1, 1, 1]
    assert [f for f in ("rows_by_trial", "one_thread_by_trial") if getattr(decision, f)] == [field]
    body = comment_body(gate, P)
    assert f'title "a: {chart}, baseline trials' in body
    assert f"- `a` in `pipelines/p.py`: {new}: {evidence}, p < 0.001" in body
    # Code scanning says what changed, not only that its comparisons differed as before.
    (found,) = sarif(gate)["runs"][0]["results"]
    assert found["message"]["text"] == f"a in pipelines/p.py: {new}: {evidence}; status DIVERGENT"
    # Showing it in more trials than the baseline did is the same question's rate up.
    some = [sometimes if i % 5 == 0 else drifting() for i in range(20)]
    gate = evaluate({P: worse}, baseline_of(some), rerun=rerun_with(worse, worse, worse))
    assert verdicts(gate) == {"a": up}
    assert is_regression(gate.decisions[0], ("rate-up",))
    assert not is_regression(gate.decisions[0], ("new",))
    # As often as on the baseline: nothing to say.
    gate = evaluate({P: drifting()}, baseline_of(some), rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED}


def test_a_step_that_differs_only_at_one_thread_has_no_second_say_in_its_cause():
    # A step that gives a new answer whenever it differs at all (random(), a clock) is
    # PERSISTS_SINGLE_THREADED in exactly the trials its score is above 0: the statistic
    # restates the score, and is left out of the family, as the rows statistic is.
    answers = {0: STEADY, 4: (0, 0, 0, 0, 1), 6: SPLIT, 10: NOISY}

    def trial(x: int) -> Result:
        r = result(("a", answers[x]))
        return caused(r, "PERSISTS_SINGLE_THREADED") if x else r

    gate = evaluate(
        {P: trial(10)},
        baseline_of([trial(x) for x in RESTATED_HISTORY]),
        rerun=rerun_with(*(trial(x) for x in RESTATED_FRESH)),
    )
    assert gate.decisions[0].one_thread_by_trial == []
    # Kept in the family, it would have made the adjustment stricter.
    assert gate.decisions[0].p_value == score_p("") < score_p("one-thread")


def test_a_step_that_lost_rows_on_the_baseline_and_still_does_is_unchanged():
    trials = [classed(result(("a", NOISY)), "ROW_MISSING") for _ in range(19)]
    now = classed(result(("a", NOISY)), "ROW_MISSING", "ROW_EXTRA")
    gate = evaluate({P: now}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED}


def test_a_step_that_stops_differing_is_fixed_and_never_a_regression():
    trials = [result(("a", NOISY)) for _ in range(19)]
    gate = evaluate({P: result(("a", STEADY))}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": FIXED}
    assert not is_regression(gate.decisions[0], ("new", "rate-up", "stable", "not-comparable"))


def test_added_removed_and_renamed_steps_are_not_comparable_and_fail_by_default():
    trials = [result(("a",), ("b",), ("c",)) for _ in range(19)]
    renamed = evaluate(
        {P: result(("a",), ("b2",), ("c",), ("e",))}, baseline_of(trials), rerun=never_rerun
    )
    assert [(d.name, d.verdict, d.renamed_from) for d in renamed.decisions] == [
        ("a", UNCHANGED, None),
        ("b2", STEP_RENAMED, "b"),
        ("c", UNCHANGED, None),
        ("e", STEP_ADDED, None),
    ]
    assert {d.name for d in renamed.regressions} == {"b2", "e"}
    removed = evaluate({P: result(("a",))}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(removed) == {"a": UNCHANGED, "b": STEP_REMOVED, "c": STEP_REMOVED}


def test_a_name_the_baseline_lacks_says_how_an_intended_change_gets_past_the_check():
    """A renamed step failed the required check with "not comparable: step renamed" and
    nothing on what to do about it, which only docs/action.md said."""
    trials = [result(("a",), ("b",)) for _ in range(19)]
    way_out = (
        "A step or pipeline the baseline has no trials of under its name cannot be called "
        "unchanged. If the change is intended, merge it past this check (someone allowed to "
        "override it, or a `fail-on` without `not-comparable` on this pull request), then "
        "refresh the baseline on the base branch with `twicerun baseline update`."
    )
    renamed = evaluate({P: result(("a",), ("b2",))}, baseline_of(trials), rerun=never_rerun)
    assert way_out in comment_body(renamed, P).split("\n\n")
    # Not where nothing failed for a name, nor where only fail-on let a rename through.
    same = evaluate({P: result(("a",), ("b",))}, baseline_of(trials), rerun=never_rerun)
    assert "no trials of under its name" not in comment_body(same, P)
    let_through = evaluate(
        {P: result(("a",), ("b2",))},
        baseline_of(trials),
        rerun=never_rerun,
        options=GateOptions(fail_on=("new", "rate-up")),
    )
    assert "no trials of under its name" not in comment_body(let_through, P)


def test_a_pipeline_the_baseline_lacks_or_the_check_skipped_is_never_silently_green():
    trials = [result(("a",)) for _ in range(19)]
    gate = evaluate(
        {P: result(("a",)), "pipelines/new.py": result(("x",), pipeline="pipelines/new.py")},
        baseline_of(trials),
        rerun=never_rerun,
    )
    assert [(d.pipeline, d.verdict) for d in gate.regressions] == [
        ("pipelines/new.py", PIPELINE_ADDED)
    ]
    lenient = evaluate(
        {"pipelines/new.py": result(("x",), pipeline="pipelines/new.py")},
        baseline_of(trials),
        rerun=never_rerun,
        options=GateOptions(fail_on=("new", "rate-up")),
    )
    assert [d.verdict for d in lenient.decisions] == [PIPELINE_ADDED, PIPELINE_MISSING]
    assert lenient.regressions == []
    strict = evaluate(
        {"pipelines/new.py": result(("x",), pipeline="pipelines/new.py")},
        baseline_of(trials),
        rerun=never_rerun,
    )
    assert {(d.pipeline, d.verdict) for d in strict.regressions} == {
        ("pipelines/new.py", PIPELINE_ADDED),
        (P, PIPELINE_MISSING),
    }


def test_a_baseline_measured_with_other_settings_is_not_comparable():
    trials = [result(("a",)) for _ in range(19)]
    gate = evaluate(
        {P: result(("a", (0, 0, 0, 0, 0, 0)), runs=6)}, baseline_of(trials), rerun=never_rerun
    )
    assert verdicts(gate) == {"a": MEASURED_OTHERWISE}
    assert "runs=5" in gate.decisions[0].evidence[0] and "runs=6" in gate.decisions[0].evidence[0]
    assert gate.regressions


def test_the_comment_calls_not_comparable_steps_that_and_not_worse_one_line_per_reason():
    """Eight steps of two pipelines measured without amplifiers against a baseline measured
    with them used to head the comment "8 steps got worse", followed by eight copies of
    one sentence."""
    trials = [result(("a",), ("b",), ("c",)) for _ in range(19)]
    base = baseline_of(trials)
    now = result(("a", NOISY), ("b",), ("c",), ("d",), runs=5)
    new = result(("x",), ("y",), pipeline="pipelines/new.py")
    gate = evaluate({P: now, "pipelines/new.py": new}, base, rerun=rerun_with(now, now, now))
    body = comment_body(gate, P)
    head = body.split("\n\n", 2)[1]
    worse = body.split("**Worse**\n\n", 1)[1]
    assert head == "### twicerun: 1 step got worse; 3 could not be compared with the baseline"
    listed = body.split("**Not comparable with the baseline**\n\n", 1)[1].split("\n\n")[0]
    assert listed.splitlines() == [
        "- `d` in `pipelines/p.py`: not comparable: step added",
        "- `pipelines/new.py`, 2 steps (`x`, `y`): not comparable: pipeline not in the baseline",
    ]
    assert worse.startswith("- `a` in `pipelines/p.py`: new divergence")

    only = comment_body(evaluate({"pipelines/new.py": new}, base, rerun=never_rerun), P)
    assert only.split("\n\n", 2)[1] == (
        "### twicerun: 5 steps could not be compared with the baseline"
    )
    assert "- `pipelines/p.py`, 3 steps (`a`, `b`, `c`): not comparable: pipeline not run" in only


def test_a_step_the_baseline_lacks_that_differed_now_says_so_in_the_list():
    """An added step that gave a new answer on every run was listed as "not comparable:
    step added", word for word what a steady one got; only the table below said 4 of 4,
    and the way out the comment offers (merge past the check, refresh the baseline)
    makes that differing the step's normal."""
    from dataclasses import replace

    trials = [result(("a",)) for _ in range(19)]
    now = result(("a",), ("steady",), ("random", NOISY), ("stressed", STEADY, (2, 2)))
    now.steps[3] = replace(now.steps[3], status="STABLE_ON_THIS_INPUT")
    new = result(("x", NOISY), ("y",), pipeline="pipelines/new.py")
    gate = evaluate({P: now, "pipelines/new.py": new}, baseline_of(trials), rerun=never_rerun)
    body = comment_body(gate, P)
    listed = body.split("**Not comparable with the baseline**\n\n", 1)[1].split("\n\n")
    assert listed[0].splitlines() == [
        "- `steady` in `pipelines/p.py`: not comparable: step added",
        "- `random` in `pipelines/p.py`: not comparable: step added; it differed in 4 of 4 "
        "comparisons now (DIVERGENT)",
        "- `stressed` in `pipelines/p.py`: not comparable: step added; it differed only under "
        "the amplifiers: 2 of 2 now (STABLE_ON_THIS_INPUT)",
        "- `pipelines/new.py`, 2 steps (`x`, `y`): not comparable: pipeline not in the "
        "baseline; differed: `x` in 4 of 4 comparisons now (DIVERGENT)",
    ]
    assert listed[1].endswith(
        "A baseline refreshed with a step that differed here takes its differing as its "
        "normal, and the check stops flagging it."
    )
    # Steady steps alone get the way out without the warning.
    steady = evaluate({P: result(("a",), ("steady",))}, baseline_of(trials), rerun=never_rerun)
    assert "takes its differing" not in comment_body(steady, P)


def test_a_pipeline_added_or_not_run_is_named_once_in_a_code_span_never_escaped():
    """The verdict's reason said again what the verdict says, with the pipeline's path as
    escaped text: `pipelines\\/one\\.py is in the check but not in the baseline`, which is
    what `baseline compare` printed on a terminal."""
    trials = [result(("a",), ("b",)) for _ in range(19)]
    one = result(("z",), pipeline="pipelines/one.py")
    gate = evaluate({"pipelines/one.py": one}, baseline_of(trials), rerun=never_rerun)
    body = comment_body(gate, P)
    listed = body.split("**Not comparable with the baseline**\n\n", 1)[1].split("\n\n")[0]
    assert listed.splitlines() == [
        "- `z` in `pipelines/one.py`: not comparable: pipeline not in the baseline",
        "- `pipelines/p.py`, 2 steps (`a`, `b`): not comparable: pipeline not run",
    ]


def test_a_step_that_stopped_writing_is_not_comparable_never_unchanged():
    """It scores 0 of 0 now, which the statistics alone read as "never differed" and
    passed as `unchanged`: a step whose body was emptied turned the check green."""
    from dataclasses import replace

    from twicerun.vocabulary.gate import NOTHING_COMPARED

    trials = [result(("a",), ("b",)) for _ in range(19)]
    now = result(("a",), ("b",))
    now.steps[0] = replace(now.steps[0], compared=0, comparisons=[], status=None)
    gate = evaluate({P: now}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": NOTHING_COMPARED, "b": UNCHANGED}
    assert gate.decisions[0].evidence == [
        "no run wrote an artifact, so nothing was compared; the baseline compared this step "
        "in 19 of 19 trials"
    ]
    assert [d.name for d in gate.regressions] == ["a"]

    # A step that never wrote anything, then or now, has nothing that changed.
    never = [result(("a",), ("b",)) for _ in range(19)]
    for trial in [*never, now]:
        trial.steps[0] = replace(trial.steps[0], compared=0, comparisons=[], status=None)
    gate = evaluate({P: now}, baseline_of(never), rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED, "b": UNCHANGED}
    assert not gate.regressions


def test_a_step_whose_amplifiers_now_fail_is_not_comparable_never_unchanged():
    """Its loop is as quiet as on the baseline, so the statistics alone said `unchanged`
    while the stress the baseline measured went unapplied: a step that now raises on
    more rows passed the check."""
    from dataclasses import replace

    from twicerun.vocabulary.gate import AMPLIFIER_FAILED

    trials = [result(("a",), ("b",)) for _ in range(19)]
    now = result(("a",), ("b",))
    now.steps[0] = replace(
        now.steps[0],
        status="AMPLIFICATION_FAILED",
        amplifiers=[Series(kind="row multiplication", threads=2, error="ValueError: too many")],
    )
    gate = evaluate({P: now}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": AMPLIFIER_FAILED, "b": UNCHANGED}
    assert gate.decisions[0].evidence == [
        "row multiplication could not run (ValueError: too many); on the baseline no "
        "amplifier failed on this step in 19 of 19 trials"
    ]
    assert [d.name for d in gate.regressions] == ["a"]

    # Failing as it did on the baseline is no change.
    gate = evaluate({P: now}, baseline_of([now] * 19), rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED, "b": UNCHANGED}


def test_a_joint_probe_that_failed_is_named_as_the_amplifiers_together():
    from dataclasses import replace

    members = ["thread count", "arrival order"]
    now = result(("a",))
    now.steps[0] = replace(
        now.steps[0],
        status="AMPLIFICATION_FAILED",
        amplifiers=[
            Series(
                kind=m,
                threads=4,
                error="ValueError: odd",
                probed_with=[o for o in members if o != m],
            )
            for m in members
        ],
    )
    gate = evaluate({P: now}, baseline_of([result(("a",)) for _ in range(19)]), rerun=never_rerun)
    assert (
        gate.decisions[0]
        .evidence[0]
        .startswith("thread count and arrival order together could not run (ValueError: odd); ")
    )


def test_a_step_stable_on_its_input_shows_the_classes_its_amplifiers_found():
    """The terminal report shows them; the gate's table left the cell empty."""
    from dataclasses import replace

    now = result(("a",))
    now.steps[0] = replace(
        now.steps[0],
        status="STABLE_ON_THIS_INPUT",
        amplifiers=[
            Series(kind="arrival order", threads=2, fired=2, compared=2, classes=["VALUE_DRIFT"])
        ],
    )
    # As stable on the baseline: unchanged, and nothing is re-run.
    gate = evaluate({P: now}, baseline_of([now] * 19), rerun=never_rerun)
    assert gate.decisions[0].classes == ["VALUE_DRIFT"]
    row = next(line for line in comment_body(gate, P).splitlines() if "| `a` |" in line)
    assert row.endswith("| STABLE_ON_THIS_INPUT | VALUE_DRIFT |  |")


def test_the_confirmation_line_names_the_pipeline_as_code():
    trials = [result(("a",)) for _ in range(19)]
    worse = result(("a", NOISY))
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    assert (
        "**Confirmation re-runs** (a suspect step is re-run before it can fail the check): "
        "`pipelines/p.py`: 3 more trials, for a"
    ) in comment_body(gate, P).splitlines()


def test_an_environment_change_is_reported_beside_the_verdicts_never_as_one():
    trials = [result(("a",)) for _ in range(19)]
    moved = Environment("2.0.2", 2, "Linux-x86_64", "3.11.7", "0.1.0")
    gate = evaluate({P: result(("a",), env=moved)}, baseline_of(trials), rerun=never_rerun)
    assert verdicts(gate) == {"a": UNCHANGED}
    assert gate.environment == ["duckdb: 2.0.1 in the baseline, 2.0.2 now"]
    assert gate.regressions == []


def test_another_thread_count_is_measured_otherwise_not_only_named():
    # It was only named beside the verdicts, and a step whose rate fell because it ran at
    # one thread passed as `better`.
    trials = [result(("a", NOISY)) for _ in range(19)]
    one_thread = Environment("2.0.1", 1, "Linux-x86_64", "3.11.7", "0.1.0")
    gate = evaluate({P: result(("a",), env=one_thread)}, baseline_of(trials), rerun=never_rerun)
    assert set(verdicts(gate).values()) == {MEASURED_OTHERWISE}
    assert gate.regressions != []


# The test's level, exactly ---------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=3, max_value=7).flatmap(
        lambda total: st.lists(
            st.lists(st.sampled_from([0.0, 0.5, 4.0, 6.0, 10.0]), min_size=total, max_size=total),
            min_size=1,
            max_size=3,
        )
    ),
    st.sampled_from([0.05, 0.1, 0.2, 0.34]),
)
def test_stage_two_rejects_at_most_alpha_of_all_relabellings(columns, alpha):
    """The permutation test's defining property, checked by brute force: over every way
    to pick which n of the T+n trials were the fresh ones (all equally likely when
    nothing changed), the family-wise rejection happens at most alpha of the time,
    whatever the scores, ties and dependence between steps."""
    total = len(columns[0])
    n = 2
    rejected = 0
    labellings = list(itertools.combinations(range(total), n))
    for fresh_idx in labellings:
        base_idx = [i for i in range(total) if i not in fresh_idx]
        baseline = {f"s{j}": [col[i] for i in base_idx] for j, col in enumerate(columns)}
        fresh = {f"s{j}": [col[i] for i in fresh_idx] for j, col in enumerate(columns)}
        tests = confirm_test(baseline, fresh)
        rejected += any(t.adjusted_p <= alpha for t in tests.values())
    assert rejected <= alpha * len(labellings) + 1e-9


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=4, max_value=7).flatmap(
        lambda total: st.tuples(
            st.lists(st.sampled_from([0.0, 4.0, 6.0, 10.0]), min_size=total, max_size=total),
            st.lists(st.sampled_from([0.0, 1.0]), min_size=total, max_size=total),
            st.lists(st.sampled_from([0.0, 1.0]), min_size=total, max_size=total),
        )
    ),
    st.sampled_from([0.05, 0.1, 0.2, 0.34]),
)
def test_the_whole_decision_rejects_at_most_alpha_of_all_relabellings(columns, alpha):
    """The same property for decide_pipeline as the gate calls it, with the rule that
    leaves a statistic that restates the score out of stage 2: it looks at every trial
    alike, so over every choice of which trials were fresh, it still rejects at most
    alpha of the time. The pull request's own trial is as bad as it gets, so every
    statistic is suspect."""
    score, kind, other = columns
    rows = [1.0 if x else 0.0 for x in score]  # restates the score in some tables
    pooled = {"a": score, "a\0one": kind, "a\0rows": rows, "b\0one": other}
    now = {"a": 100.0, "a\0one": 1.0, "a\0rows": 1.0, "b\0one": 1.0}
    n = 2
    total = len(score)
    labellings = list(itertools.combinations(range(total), n))
    rejected = 0
    for fresh_idx in labellings:
        base_idx = [i for i in range(total) if i not in fresh_idx]
        trials = iter([{k: v[i] for k, v in pooled.items()} for i in fresh_idx])
        outcomes, _ = decide_pipeline(
            {k: [v[i] for i in base_idx] for k, v in pooled.items()},
            now,
            trials.__next__,
            level=alpha,
            confirm=n,
            implied={"a\0rows": "a", "a\0one": "a"},
        )
        rejected += any(o.verdict in (NEW, RATE_UP) for o in outcomes.values())
    assert rejected <= alpha * len(labellings) + 1e-9


def test_the_default_baseline_size_follows_from_alpha_and_the_power_target():
    assert default_trials(0.05, runs=5, confirm=3) == 19  # 1 / alpha - 1 binds
    assert default_trials(0.01, runs=5, confirm=3) == 99
    # The smallest baseline stage 2 can ever reject with: C(T + 3, 3) >= 1 / alpha.
    assert needed_trials(0.05, 3) == 3
    assert needed_trials(0.05, 3, pipelines=4) == 6


@pytest.mark.parametrize("trials", [3, 4, 9, 19])
@pytest.mark.parametrize("pipelines", [1, 3])
def test_the_power_quoted_is_what_the_decision_does_with_a_coin_step(trials, pipelines):
    """coin_power is the figure `baseline update` prints; here it is checked against the
    gate's own decide_pipeline, weighing every pattern of trials that show the step."""
    runs, confirm, alpha = 5, 3, 0.05
    d = 1 - 2 ** (1 - runs)
    exact = 0.0
    for shows in itertools.product([True, False], repeat=1 + confirm):
        fresh = iter([{"coin": 0.5 if s else 0.0} for s in shows[1:]])
        outcomes, _ = decide_pipeline(
            {"coin": [0.0] * trials},
            {"coin": 0.5 if shows[0] else 0.0},
            fresh.__next__,
            level=alpha / pipelines,
        )
        if outcomes["coin"].verdict == NEW:
            exact += math.prod(d if s else 1 - d for s in shows)
    assert coin_power(trials, alpha, runs, confirm, pipelines) == pytest.approx(exact)


def test_the_trials_for_the_power_target_are_the_fewest_that_reach_it():
    assert coin_power(trials_for_power()) >= 0.9 > coin_power(trials_for_power() - 1)
    many = trials_for_power(pipelines=10)
    assert coin_power(many, pipelines=10) >= 0.9 > coin_power(many - 1, pipelines=10)
    # Two runs a trial show a coin step half the time: no baseline is enough.
    assert trials_for_power(runs=2) is None
    # The default grows with the pipelines, which share alpha.
    assert default_trials(pipelines=10) == many > default_trials()


def test_annotations_escape_data_and_properties_differently():
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext%3A a%2Cb"
    line = Annotation("error", "moved: 1%\nmore", "step a,b: x", "pipelines/p,q.py", 12).command()
    assert (
        line == "::error file=pipelines/p%2Cq.py,line=12,title=step a%2Cb%3A x::moved: 1%25%0Amore"
    )


def test_at_most_ten_annotations_per_severity_with_the_rest_counted():
    many = [Annotation("warning", f"m{i}", f"t{i}") for i in range(13)] + [
        Annotation("error", "e", "t")
    ]
    lines = commands(many)
    # Ten warning lines in all, the one counting the rest among them: GitHub drops an eleventh.
    assert sum(1 for line in lines if line.startswith("::warning")) == 10
    assert lines[-1] == "::warning title=twicerun::4 more warnings not shown; see the job summary"
    assert lines[0].startswith("::error ")


def test_outputs_use_a_random_delimiter_and_survive_multiline_values(tmp_path):
    path = tmp_path / "out"
    write_outputs(path, {"result": "a\nb", "n": "3"})
    text = path.read_text()
    match = re.match(
        r"result<<(ghadelimiter_[0-9a-f]{32})\na\nb\n\1\nn<<(ghadelimiter_[0-9a-f]{32})\n3\n\2\n$",
        text,
    )
    assert match and match.group(1) != match.group(2)


HOSTILE = "a%b:c,d\n<!-- x -->|`tick`<script>alert(1)</script>*em*[link](http://x)"


def test_a_hostile_step_name_renders_as_plain_text_in_the_comment():
    trials = [result(("safe",)) for _ in range(19)]
    now = result(("safe",), (HOSTILE, NOISY))
    gate = evaluate({P: now}, baseline_of(trials), rerun=never_rerun)
    body = comment_body(gate, "pipelines/*.py")
    # Rendered the way GitHub renders Markdown (raw HTML allowed), nothing of the name
    # becomes markup: no element, no comment, no link, no emphasis.
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(body)
    assert "<script>" not in html and "<!-- x -->" not in html and "<em>" not in html
    assert '<a href="http://x">' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # The name sits in a code span whose fence is longer than any backtick run inside it,
    # with its pipe escaped and its line break flattened.
    assert "``a%b:c,d <!-- x -->\\|`tick`<script>alert(1)</script>*em*[link](http://x)``" in body
    table_rows = [line for line in body.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") == 8 for line in table_rows[2:])


def test_a_hostile_step_name_in_an_annotation_cannot_end_the_command():
    trials = [result(("safe",)) for _ in range(19)]
    gate = evaluate(
        {P: result(("safe",), (HOSTILE, NOISY))}, baseline_of(trials), rerun=never_rerun
    )
    (line,) = [line for line in commands(gate.annotations) if line.startswith("::error")]
    assert "\n" not in line
    properties, _message = line[len("::error ") :].split("::", 1)
    assert "," not in properties.split("title=")[1]
    assert ":" not in properties.split("title=")[1]


def test_the_comment_stays_under_githubs_limit_and_points_to_the_summary():
    steps = [(f"step_{i}_" + "x" * 200, NOISY if i % 2 else STEADY) for i in range(600)]
    trials = [result(*steps) for _ in range(3)]
    gate = evaluate({P: result(*steps)}, baseline_of(trials), rerun=never_rerun)
    body = comment_body(gate, "pipelines/*.py", "https://github.test/run/1")
    assert len(body) < 65_536
    assert (
        "cut to keep this comment under GitHub's size limit; the [job summary](https://github.test/run/1) has every step."
        in body
    )


INJECTED = "x\n::error file=README.md,line=1::injected\n  ::add-mask::secret\nsee ##[error]bad"


def test_the_lines_that_stop_and_resume_workflow_commands_share_a_random_token():
    from twicerun.github.commands import stop_commands

    tokens = []
    for _ in range(2):
        stop, resume = stop_commands()
        token = stop.removeprefix("::stop-commands::")
        assert stop != token and len(token) == 32 and resume == f"::{token}::"
        tokens.append(token)
    assert tokens[0] != tokens[1]  # nothing a step prints can guess it


def test_neutralize_leaves_no_line_a_runner_would_read_as_a_command():
    from twicerun.github.commands import neutralize

    text = neutralize(INJECTED)
    for line in text.splitlines():
        assert not line.lstrip().startswith("::")
        assert "##[" not in line
    # Only an invisible character was added; the words are all still there.
    assert text.replace("\u2060", "") == INJECTED


def test_a_step_error_carrying_a_workflow_command_prints_as_text(write_pipeline, twicerun):
    path = write_pipeline(f"def a(ctx):\n    raise ValueError({INJECTED!r})\n")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert "injected" in outcome.err
    for line in (outcome.err + outcome.out).splitlines():
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line


def test_four_hundred_regressions_still_make_a_body_github_accepts():
    names = [f"step_{i}_" + "y" * 120 for i in range(400)]
    trials = [result(*[(n, STEADY) for n in names]) for _ in range(19)]
    worse = result(*[(n, NOISY) for n in names])
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    assert len(gate.regressions) == 400
    body = comment_body(gate, "pipelines/*.py", "https://github.test/run/1")
    assert len(body) < 65_536
    assert "more not shown here, to keep this comment under GitHub's size limit" in body
    # The summary has no budget: every regression is in it.
    from twicerun.github.summary import summary

    text = summary(gate, "pipelines/*.py")
    assert all(n in text for n in names)


def test_a_summary_in_another_script_stays_under_githubs_limit_in_bytes():
    """GitHub drops a job summary over 1 MiB whole, and counts bytes: step names in CJK are
    three bytes a character: these made a summary of 1.4 MB that was never cut."""
    from twicerun.github.summary import SUMMARY_BUDGET, summary

    names = [f"集計_{i}_" + "集" * 200 for i in range(1000)]
    trials = [result(*[(n, STEADY) for n in names]) for _ in range(5)]
    worse = result(*[(n, NOISY) for n in names])
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    text = summary(gate, "pipelines/*.py")
    assert SUMMARY_BUDGET * 0.9 < len(text.encode("utf-8")) <= SUMMARY_BUDGET < 1_048_576
    # It cannot send the reader to itself for the rest.
    cut = [line for line in text.splitlines() if "more not shown here" in line]
    assert len(cut) == 1 and cut[0].endswith(
        "more not shown here, to keep this job summary under GitHub's 1 MiB limit; the gate "
        "document (the action's `result` output, or `--json`) has them all."
    )
    assert "job summary has" not in text


def test_the_comment_is_found_by_the_sorted_pipelines_or_an_explicit_id():
    from twicerun.github.comment import marker

    trials = [result(("a",)) for _ in range(19)]
    one = evaluate({P: result(("a",))}, baseline_of(trials), rerun=never_rerun)
    assert comment_body(one, "./pipelines/p.py").startswith(marker(P))
    assert comment_body(one, "pipelines/*.py").startswith(marker(P))
    assert comment_body(one, "x", comment_id="nightly").startswith(marker("nightly"))


def test_the_comment_charts_a_changed_step_trial_by_trial():
    trials = [result(("a", STEADY)) for _ in range(19)]
    worse = result(("a", SPLIT))
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    body = comment_body(gate, "pipelines/*.py")
    chart = body.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert chart.startswith("xychart-beta\n")
    assert '"b1"' in chart and '"b19"' in chart and '"now"' in chart and '"re-run 3"' in chart
    assert f"    bar [{', '.join(['0'] * 19 + ['3', '3', '3', '3'])}]" in chart
    unchanged = evaluate({P: result(("a", STEADY))}, baseline_of(trials), rerun=never_rerun)
    assert "```mermaid" not in comment_body(unchanged, "pipelines/*.py")


def test_a_step_that_differs_only_under_the_amplifiers_says_so_wherever_it_is_reported():
    # Its loop runs agree in every trial, so "0 of 4 now" alone would leave a failed
    # check with nothing to show for it: the amplifiers' counts are what decided it.
    trials = [result(("top", STEADY, (0, 2))) for _ in range(19)]
    rerun = rerun_with(*(result(("top", STEADY, s)) for s in ((2, 2), (1, 2), (2, 2))))
    gate = evaluate({P: result(("top", STEADY, (2, 2)))}, baseline_of(trials), rerun=rerun)
    assert verdicts(gate) == {"top": NEW}
    clause = "only under the amplifiers: 2 of 2 now, then 2 of 2, 1 of 2, 2 of 2 on re-runs"
    body = comment_body(gate, "pipelines/*.py")
    assert (
        f"- `top` in `{P}`: new divergence, differed in 0 of 19 trials on the baseline, "
        f"0 of 4 now, then 0, 0, 0 on re-runs; {clause}, p < 0.001"
    ) in body.splitlines()
    (row,) = [line for line in body.splitlines() if line.startswith("| `pipelines/p.py` | `top`")]
    assert f"| 0 of 4, then 0, 0, 0 on re-runs; {clause} |" in row
    (annotation,) = [a for a in gate.annotations if a.title.startswith("twicerun: top")]
    assert clause in annotation.message
    # Its chart draws the amplifiers' counts, not nineteen zeros and four more.
    assert 'title "top: amplifier comparisons that differed, baseline trials then this run"' in body
    assert f"    bar [{', '.join(['0'] * 19)}, 2, 2, 1, 2]" in body.splitlines()
    assert '    y-axis "of 2" 0 --> 2' in body.splitlines()


def test_a_step_found_by_the_loop_in_some_trials_and_the_amplifiers_in_others_charts_both():
    """Its trials differed either in the loop or, where the loop agreed, under the
    amplifiers: "differed in 19 of 19 trials" stood over a chart of the loop's counts,
    whose bars were 0 for the nine trials the amplifiers found it in."""
    trials = [result(("a", SPLIT)) for _ in range(10)]
    trials += [result(("a", STEADY, (3, 12))) for _ in range(9)]
    gate = evaluate({P: result(("a", STEADY))}, baseline_of(trials), rerun=never_rerun)
    (d,) = gate.decisions
    assert d.baseline_differed_trials == 19
    body = comment_body(gate, "pipelines/*.py")
    lines = body.splitlines()
    assert (
        "    title \"a: comparisons that differed, the amplifiers' where the "
        "loop's agreed, baseline trials then this run\""
    ) in lines
    assert '    y-axis "percent of them" 0 --> 100' in lines
    assert f"    bar [{', '.join(['75'] * 10 + ['25'] * 9 + ['0'])}]" in lines


def test_a_step_the_loop_found_on_the_baseline_and_only_the_amplifiers_now_charts_both():
    """Every baseline trial differed in the loop, so none was amplified, and now only the
    amplifiers found it: the chart of amplifier comparisons drew nineteen zeros for
    trials that differed every time, beside this run's count."""
    trials = [result(("a", SPLIT)) for _ in range(19)]
    gate = evaluate({P: result(("a", STEADY, (10, 12)))}, baseline_of(trials), rerun=never_rerun)
    lines = comment_body(gate, "pipelines/*.py").splitlines()
    assert (
        "    title \"a: comparisons that differed, the amplifiers' where the "
        "loop's agreed, baseline trials then this run\""
    ) in lines
    assert f"    bar [{', '.join(['75'] * 19 + ['83'])}]" in lines


def test_a_joint_probe_counts_once_not_once_per_member():
    """A joint probe's runs are recorded under each of its four members; the gate summed
    them per member and said "16 of 16" for a probe that compared four times."""
    members = ["thread count", "arrival order", "tie collapse", "row multiplication"]

    def jointly(r: Result, fired: int) -> Result:
        (s,) = r.steps
        probes = [
            Series(
                kind=m,
                threads=4,
                fired=fired,
                compared=4,
                probed_with=[o for o in members if o != m],
            )
            for m in members
        ]
        declined = Series(kind="file order", threads=2, declined="no list of files")
        s = StepResult(**{**s.__dict__, "amplifiers": [*probes, declined]})
        return Result(**{**r.__dict__, "steps": [s]})

    assert [a.kind for a in jointly(result(("top", STEADY)), 4).steps[0].stress] == ["thread count"]
    trials = [jointly(result(("top", STEADY)), 0) for _ in range(19)]
    rerun = rerun_with(*(jointly(result(("top", STEADY)), 4) for _ in range(3)))
    gate = evaluate({P: jointly(result(("top", STEADY)), 4)}, baseline_of(trials), rerun=rerun)
    assert verdicts(gate) == {"top": NEW}
    assert (
        "only under the amplifiers: 4 of 4 now, then 4 of 4, 4 of 4, 4 of 4 on re-runs"
        in comment_body(gate, "pipelines/*.py")
    )


def test_a_step_whose_loop_fired_reports_no_amplifier_clause():
    trials = [result(("top", STEADY)) for _ in range(19)]
    rerun = rerun_with(*(result(("top", NOISY)) for _ in range(3)))
    gate = evaluate({P: result(("top", NOISY))}, baseline_of(trials), rerun=rerun)
    assert verdicts(gate) == {"top": NEW}
    assert "only under the amplifiers" not in comment_body(gate, "pipelines/*.py")


def test_twiceruns_own_words_print_without_backslashes():
    """`baseline compare` prints the summary to a terminal too, where every `\\_` and `\\.`
    of the escaping used to show (`NO\\_DIVERGENCE\\_OBSERVED`, `DuckDB 2\\.0\\.1`)."""
    trials = [result(("safe",)) for _ in range(19)]
    gate = evaluate(
        {P: result(("safe",), ("noisy", NOISY))}, baseline_of(trials), rerun=never_rerun
    )
    lines = comment_body(gate, "pipelines/*.py").splitlines()
    # Nineteen trials meet the power target, so nothing is said of it.
    assert lines[-1] == (
        "twicerun 0.1.0, DuckDB 2.0.1 at threads=2, 5 runs, policy strict; "
        "alpha 0.05 family-wise, 3 confirmation trials for a suspect pipeline."
    )
    (row,) = [line for line in lines if line.startswith("| `pipelines/p.py` | `safe` |")]
    assert row.endswith("| NO_DIVERGENCE_OBSERVED |  |  |")

    older = Environment("1.5.5", 2, "Linux-x86_64", "3.11.7", "0.1.0")
    moved = evaluate(
        {P: result(("safe",))}, baseline_of([result(("safe",), env=older)] * 19), rerun=never_rerun
    )
    body = comment_body(moved, "pipelines/*.py")
    assert (
        "**The instrument changed** (beside the verdicts, not one of them): "
        "duckdb: 1.5.5 in the baseline, 2.0.1 now"
    ) in body.splitlines()
    # What to do about it, said only when what measures changed, not the platform alone.
    refresh = "refresh the baseline on the base branch with `twicerun baseline update`."
    assert body.count(refresh) == 1
    elsewhere = Environment("2.0.1", 2, "Darwin-arm64", "3.11.7", "0.1.0")
    moved = evaluate(
        {P: result(("safe",))},
        baseline_of([result(("safe",), env=elsewhere)] * 19),
        rerun=never_rerun,
    )
    body = comment_body(moved, "pipelines/*.py")
    assert "platform: Darwin-arm64 in the baseline" in body and refresh not in body

    from twicerun.render.markdown import bare

    # GitHub links a bare www. address, which CommonMark (and the test below) does not.
    assert bare("see www.example.com") == "see www\\.example\\.com"


# Printable ASCII and a few non-ASCII letters, and text close to twicerun's own words
# (letters with one markup character among them), where a too-loose `bare` would fail.
MARKDOWN_TEXT = st.one_of(
    st.text(
        alphabet=st.sampled_from([chr(c) for c in range(32, 127)] + ["é", "ß", "\u00a0"]),
        max_size=40,
    ),
    st.tuples(
        st.sampled_from(["a", "Z", "3"]),
        st.lists(
            st.sampled_from(
                [
                    "a",
                    "Z",
                    "0",
                    "a",
                    "Z",
                    "0",
                    " ",
                    ",",
                    ".",
                    ";",
                    ":",
                    "=",
                    "-",
                    "_",
                    "*",
                    "`",
                    "[",
                    "]",
                    "(",
                    ")",
                    "<",
                    ">",
                    "&",
                    "|",
                    "\\",
                    "~",
                    "!",
                    "@",
                    "/",
                    "#",
                    "www.",
                ]
            ),
            max_size=12,
        ),
    ).map(lambda t: t[0] + "".join(t[1])),
)


@settings(max_examples=400, deadline=None)
@given(MARKDOWN_TEXT)
@example("a*Z*")
@example("a_b_ c")
@example("see www.example.com")
@example("NO_DIVERGENCE_OBSERVED")
@example("3. trials")
@example("3.")
@example("12 more trials")
def test_bare_text_renders_as_exactly_itself(text):
    from twicerun.render.markdown import bare

    flat = " ".join(text.split())
    if not flat:
        return
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(bare(text))
    escaped = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert rendered == f"<p>{escaped.replace(chr(34), '&quot;')}</p>\n"


@settings(max_examples=300, deadline=None)
@given(MARKDOWN_TEXT, MARKDOWN_TEXT, MARKDOWN_TEXT)
@example("no baseline at a/b.json;", "twicerun baseline update p.py", "and commit it")
@example("a", "`x` *y*", "<b>")
def test_a_sentence_shows_its_backticked_spans_as_code_and_nothing_as_other_markup(
    before, span, after
):
    """twicerun's sentences name commands between backticks; `sentence` renders those as
    code and the words around them as themselves, whatever a path or name inside holds."""
    from twicerun.render.markdown import sentence

    rendered = (
        MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .render(sentence(f"{before} `{span}` {after}"))
    )
    assert set(re.findall(r"</?([A-Za-z][A-Za-z0-9]*)", rendered)) <= {"p", "code"}
    assert rendered.startswith("<p>") and rendered.endswith("</p>\n")
    # Where no other backtick pairs with those around the span, the span is what shows.
    if "`" not in before + span + after and span.strip() and span == " ".join(span.split()):
        inside = span.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f"<code>{inside.replace(chr(34), '&quot;')}</code>" in rendered


def test_the_summary_reads_back_as_text_for_a_terminal():
    """`baseline compare --format text` (the default on a terminal): the same document,
    without escapes, pipes or chart source; exact bytes."""
    from twicerun.github.summary import summary
    from twicerun.render.plaintext import markdown_to_text

    trials = [result(("a",), ("b", NOISY)) for _ in range(5)]
    worse = result(("a", NOISY), ("b", NOISY))
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    assert markdown_to_text(summary(gate, P)) == (
        "twicerun: 1 step got worse\n\n"
        "Worse\n\n"
        "  - a in pipelines/p.py: new divergence, differed in 0 of 5 trials on the baseline, "
        "4 of 4 now, then 4, 4, 4 on re-runs, p = 0.018\n\n"
        "Each changed step, trial by trial\n\n"
        "  a: comparisons that differed, baseline trials then this run (of 4)\n"
        "    b1  b2  b3  b4  b5  now  re-run 1  re-run 2  re-run 3\n"
        "     0   0   0   0   0    4         4         4         4\n\n"
        "Confirmation re-runs (a suspect step is re-run before it can fail the check): "
        "pipelines/p.py: 3 more trials, for a\n\n"
        "Every step (2)\n\n"
        "pipeline        step  verdict         baseline                   "
        "now                              p      status     classes  cause\n"
        "pipelines/p.py  a     new divergence  differed in 0 of 5 trials  "
        "4 of 4, then 4, 4, 4 on re-runs  0.018  DIVERGENT\n"
        "pipelines/p.py  b     unchanged       differed in 5 of 5 trials  "
        "4 of 4                                  DIVERGENT\n\n"
        "twicerun 0.1.0, DuckDB 2.0.1 at threads=2, 5 runs, policy strict; alpha 0.05 "
        "family-wise, 3 confirmation trials for a suspect pipeline. With 5 baseline trials, "
        "a step that newly gives one of two answers at random on each run fails this check "
        "77 percent of the time; 9 trials reach 90 percent (`twicerun baseline update --add`).\n"
    )
    # A GitHub alert in a block quote, and outside text that was escaped for Markdown.
    assert markdown_to_text("> [!WARNING]\n> **Careful:** `a|b` and x\\_y\n") == (
        "  WARNING: Careful: a|b and x_y\n"
    )


def test_the_power_note_shows_its_command_as_code_on_github():
    # The note's backticks made the whole line under the table look like markup, so all
    # of it was escaped (`0\\.1\\.0\\,`), the command's backticks included, and GitHub
    # showed them as literal characters instead of code.
    from twicerun.github.summary import summary

    trials = [result(("a",)) for _ in range(5)]
    gate = evaluate({P: result(("a",))}, baseline_of(trials), rerun=never_rerun)
    markdown = summary(gate, P)
    last = markdown.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("twicerun 0.1.0, DuckDB 2.0.1 at threads=2, 5 runs")
    assert last.endswith("9 trials reach 90 percent (`twicerun baseline update --add`).")
    html = MarkdownIt("commonmark").render(last)
    assert "<code>twicerun baseline update --add</code>" in html


def test_the_comment_names_the_commit_it_measured():
    # After a new push the comment keeps showing the last check until the new one
    # finishes, or for good if it is cancelled; unlabelled, it read as the new commit's.
    trials = [result(("a",)) for _ in range(5)]
    pull = {"number": 7, "head_sha": "0123456789abcdef0123456789abcdef01234567"}
    gate = evaluate({P: result(("a",))}, baseline_of(trials), rerun=never_rerun, pull_request=pull)
    last = comment_body(gate, P).rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("Measured at 0123456789ab: twicerun 0.1.0, DuckDB 2.0.1 at threads=2")
    unknown = evaluate({P: result(("a",))}, baseline_of(trials), rerun=never_rerun)
    assert comment_body(unknown, P).rstrip("\n").rsplit("\n", 1)[-1].startswith("twicerun 0.1.0")


def test_the_logs_last_line_calls_a_step_it_could_not_compare_no_regression():
    # It read "1 step could not be compared with the baseline (1 regression, ...)": the
    # headline said nothing got worse, and the count beside it said something had.
    from twicerun.cli.gate import closing_line
    from twicerun.vocabulary.exits import GateExit

    new = "pipelines/new.py"
    trials = [result(("a",)) for _ in range(5)]
    gate = evaluate(
        {P: result(("a",)), new: result(("b",), pipeline=new)},
        baseline_of(trials),
        rerun=never_rerun,
    )
    assert closing_line(gate, GateExit.FAILED, 1.0) == (
        "twicerun: check failed (exit 1): 1 step could not be compared with the baseline "
        "(outputs regressions=1, diverged=0), in 1.0s"
    )


def test_the_stamp_names_every_engine_the_pipelines_ran_on_once():
    from dataclasses import replace

    from twicerun.github.summary import stamp

    spark = replace(ENV, engine="spark", spark="4.0.0", spark_master="local[2]")
    results = {
        P: result(("a",)),
        "pipelines/q.py": result(("b",), pipeline="pipelines/q.py"),
        "pipelines/s.py": result(("c",), env=spark, pipeline="pipelines/s.py"),
    }
    assert stamp(results, GateOptions()) == (
        "twicerun 0.1.0, DuckDB 2.0.1 at threads=2; Spark 4.0.0 on local[2] at partitions=2, "
        "compared by DuckDB 2.0.1, 5 runs, policy strict; alpha 0.05 family-wise, 3 "
        "confirmation trials for a suspect pipeline."
    )


# What `baseline update` writes, `parse` reads back ------------------------------------


@st.composite
def baselines(draw) -> Baseline:
    from twicerun.github.baseline import PipelineShape, Settings, StepShape, Trial

    runs = draw(st.integers(2, 6))
    names = draw(
        st.lists(
            st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    shape = PipelineShape(
        digest=draw(st.text(min_size=1, max_size=8)),
        steps=tuple(
            StepShape(n, i, draw(st.none() | st.integers(1, 500))) for i, n in enumerate(names)
        ),
    )

    def record() -> StepRecord:
        length = draw(st.integers(1, runs))
        answers = (
            0,
            *draw(st.lists(st.integers(0, runs), min_size=length - 1, max_size=length - 1)),
        )
        compared = draw(st.integers(0, runs - 1))
        stress_compared = draw(st.integers(0, 12))
        return StepRecord(
            answers=answers,
            stress_fired=draw(st.integers(0, stress_compared)),
            stress_compared=stress_compared,
            fired=draw(st.integers(0, compared)),
            compared=compared,
            status=draw(st.none() | st.sampled_from(["DIVERGENT", "NO_DIVERGENCE_OBSERVED"])),
            classes=tuple(draw(st.lists(st.sampled_from(["VALUE_DRIFT", "SCHEMA"]), max_size=2))),
            cause=draw(st.none() | st.just("PARALLEL_ORDER")),
        )

    trials = tuple(
        Trial(
            written="2026-12-02T00:00:00Z",
            environment={"duckdb": "2.0.1", "threads": 2},
            pipelines={"pipelines/p.py": {n: record() for n in names}},
        )
        for _ in range(draw(st.integers(1, 3)))
    )
    return Baseline(
        settings=Settings(
            runs=runs,
            policy=draw(st.sampled_from(["strict", "reduction-order"])),
            amplify=draw(st.booleans()),
            threads=draw(st.integers(1, 16)),
            engine=draw(st.sampled_from(["duckdb", "spark"])),
        ),
        pipelines={"pipelines/p.py": shape},
        trials=trials,
        command="twicerun baseline update pipelines/p.py",
    )


@given(baselines())
@settings(max_examples=60, deadline=None)
def test_every_baseline_update_can_write_is_read_back_as_it_was(baseline):
    # The reader holds a file to what the writer produces; nothing the writer can produce
    # may be refused as malformed.
    from twicerun.github.baseline import parse

    assert parse(baseline.to_json(), "b.json", "recreate") == baseline


@given(baselines())
@settings(max_examples=10, deadline=None)
def test_a_baseline_saved_with_a_byte_order_mark_is_read_as_without_one(baseline):
    """Notepad and some Windows editors put a BOM in front of UTF-8 on saving; the baseline
    was refused as "not JSON" and the advice was to run every trial again."""
    import tempfile

    from twicerun.github.baseline import load

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "twicerun-baseline.json"
        path.write_text(baseline.to_json(), encoding="utf-8-sig")
        assert path.read_bytes().startswith(b"\xef\xbb\xbf")
        assert load(path, "recreate") == baseline


# A gate document read back (the fork flow posts from one a fork's run wrote) ----------


def _document() -> dict:
    import json

    trials = [result(("a", STEADY), ("b", STEADY)) for _ in range(19)]
    worse = result(("a", SPLIT), ("b", STEADY))
    gate = evaluate({P: worse}, baseline_of(trials), rerun=rerun_with(worse, worse, worse))
    return json.loads(gate.json())


def _places(value, path=()):
    """Every place in a JSON value, as a path of keys and indexes."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k)
            yield from _places(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*path, i)
            yield from _places(v, (*path, i))


DOCUMENT = _document()
PLACES = list(_places(DOCUMENT))


@given(
    st.sampled_from(PLACES),
    st.sampled_from([5, -1, 1.5, "x", None, True, [], {}, [1], ["a"]]),
)
@settings(max_examples=300, deadline=None)
def test_a_gate_document_with_any_value_of_the_wrong_type_is_refused_or_rendered(place, wrong):
    # `post` read a fork's document with the dataclasses' types unchecked: a string where
    # a count belonged passed the reading and crashed the rendering, an internal error
    # (exit 3) where the flow promises a refusal (exit 2) or a comment.
    import copy

    from twicerun.github.gate import Gate
    from twicerun.github.summary import comment_body

    document = copy.deepcopy(DOCUMENT)
    holder = document
    for key in place[:-1]:
        holder = holder[key]
    holder[place[-1]] = wrong
    try:
        gate = Gate.from_document(document)
    except (ValueError, TypeError, KeyError):
        return  # what `post` turns into "not a twicerun gate document", exit 2
    assert comment_body(gate, P, "https://github.test/run").startswith("<!-- twicerun:comment:")


def test_who_edited_the_baseline_is_read_back_from_a_closed_set():
    # The fork flow renders the comment from a document an untrusted run wrote: the word
    # naming what edited the baseline goes into the comment, so only the three are read.
    import copy

    from twicerun.github.gate import Gate

    document = copy.deepcopy(DOCUMENT)
    document["changed_by"] = "merge group"
    assert Gate.from_document(document).changed_by == "merge group"
    document["changed_by"] = "pull request](https://evil.test)"
    with pytest.raises(ValueError, match="changed_by is not one of"):
        Gate.from_document(document)
    del document["changed_by"]  # a document written before it existed
    assert Gate.from_document(document).changed_by == "pull request"


def test_a_check_measured_otherwise_is_told_what_to_give_and_stays_unescaped():
    measured = Settings(runs=5, policy="strict", amplify=True, threads=2)
    spark = Settings(runs=5, policy="strict", amplify=True, threads=2, engine="spark")
    assert measure_alike(measured, spark) == (
        "to measure as the baseline did, run the pipelines on duckdb as they were; "
        "or update the baseline"
    )
    left_out = Settings(runs=5, policy="strict", amplify=True, threads=2, without=("file order",))
    assert measure_alike(measured, left_out) == (
        "to measure as the baseline did, give no --without, in the action without left "
        "empty; or update the baseline"
    )
    # Amplifiers back on, and the one the baseline left out left out again, in one sentence.
    assert measure_alike(left_out, Settings(5, "strict", False, 2)) == (
        "to measure as the baseline did, give --amplify and --without file-order, in the "
        "action amplify: true and without: file-order; or update the baseline"
    )
    off = Settings(runs=5, policy="strict", amplify=False, threads=2)
    assert measure_alike(off, left_out) == (
        "to measure as the baseline did, give --no-amplify and no --without, in the action "
        "amplify: false and without left empty; or update the baseline"
    )
    # The job summary shows it as written: nothing in it is markup.
    from twicerun.render.markdown import bare

    for now in (spark, left_out, Settings(3, "reduction-order", False, 4)):
        said = measure_alike(measured, now)
        assert bare(said) == said
