"""The gate's decisions, its escaping, its annotations and its outputs."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from twicerun.github.baseline import (
    ADDED,
    FIXED,
    NEW,
    RATE_UP,
    REMOVED,
    RENAMED,
    UNCHANGED,
    build,
    decide,
    is_regression,
)
from twicerun.github.commands import (
    Annotation,
    commands,
    escape_data,
    escape_property,
    write_outputs,
)
from twicerun.github.gate import comment_body, evaluate
from twicerun.github.stats import fisher_one_sided
from twicerun.result import Environment, Result, StepResult

ENV = Environment("2.0.1", 2, "Linux", "3.11.7", "0.1.0")


def result(
    *steps: tuple[str, int, int], env: Environment = ENV, pipeline="pipelines/p.py"
) -> Result:
    return Result(
        pipeline=pipeline,
        runs=5,
        contained=True,
        policy="strict",
        environment=env,
        seconds=1.0,
        steps=[
            StepResult(
                index=i,
                name=name,
                line=10 * i + 1,
                fired=k,
                compared=m,
                status="DIVERGENT" if k else "NO_DIVERGENCE_OBSERVED",
                file="pipelines/p.py",
            )
            for i, (name, k, m) in enumerate(steps)
        ],
    )


def baseline_of(trials: list[Result]) -> dict:
    return build({"pipelines/p.py": trials}, "twicerun baseline update")


def verdicts(baseline: dict, now: Result) -> dict[str, str]:
    return {d.name: d.verdict for d in decide(baseline, "pipelines/p.py", now)}


def test_identical_distributions_are_unchanged():
    trials = [result(("a", 0, 4), ("b", 4, 4), ("c", 2, 4)) for _ in range(5)]
    assert verdicts(baseline_of(trials), result(("a", 0, 4), ("b", 4, 4), ("c", 2, 4))) == {
        "a": UNCHANGED,
        "b": UNCHANGED,
        "c": UNCHANGED,
    }


def test_zero_on_every_baseline_trial_then_four_of_four_is_a_new_divergence():
    trials = [result(("a", 0, 4)) for _ in range(5)]
    (decision,) = decide(baseline_of(trials), "pipelines/p.py", result(("a", 4, 4)))
    assert decision.verdict == NEW
    assert decision.p_value == pytest.approx(1 / 10626)  # one split in C(24, 4)
    assert is_regression(decision, ["new", "rate-up"])


def test_intermittent_to_intermittent_is_unchanged():
    # 2 of 4 on the baseline trials, 3 of 4 now: no ratio threshold, an exact test.
    trials = [result(("a", 2, 4)) for _ in range(5)]
    (decision,) = decide(baseline_of(trials), "pipelines/p.py", result(("a", 3, 4)))
    assert decision.verdict == UNCHANGED
    assert not is_regression(decision, ["new", "rate-up"])


def test_a_step_that_stops_firing_is_fixed_and_never_a_regression():
    trials = [result(("a", 4, 4)) for _ in range(5)]
    (decision,) = decide(baseline_of(trials), "pipelines/p.py", result(("a", 0, 4)))
    assert decision.verdict == FIXED
    assert not is_regression(decision, ["new", "rate-up", "stable", "not-comparable"])


def test_a_rate_that_rises_significantly_is_rate_up():
    trials = [result(("a", 1, 4)) for _ in range(10)]
    assert verdicts(baseline_of(trials), result(("a", 4, 4)))["a"] == RATE_UP


def test_added_removed_and_renamed_steps_are_not_comparable():
    trials = [result(("a", 0, 4), ("b", 0, 4), ("c", 0, 4)) for _ in range(3)]
    renamed = decide(
        baseline_of(trials),
        "pipelines/p.py",
        result(("a", 0, 4), ("b2", 0, 4), ("c", 0, 4), ("e", 0, 4)),
    )
    assert [(d.name, d.verdict, d.renamed_from) for d in renamed] == [
        ("a", UNCHANGED, None),
        ("b2", RENAMED, "b"),
        ("c", UNCHANGED, None),
        ("e", ADDED, None),
    ]
    assert verdicts(baseline_of(trials), result(("a", 0, 4))) == {
        "a": UNCHANGED,
        "b": REMOVED,
        "c": REMOVED,
    }


def test_fisher_matches_a_hand_count():
    up, down = fisher_one_sided(0, 4, 4, 4)
    assert up == pytest.approx(1 / 70)
    assert down == pytest.approx(1.0)


def test_an_environment_change_is_reported_beside_the_verdicts_never_as_one():
    trials = [result(("a", 0, 4)) for _ in range(3)]
    moved = Environment("2.0.2", 8, "Linux", "3.11.7", "0.1.0")
    gate = evaluate(
        {"pipelines/p.py": result(("a", 0, 4), env=moved)}, baseline_of(trials), fail_on=["new"]
    )
    assert [d.verdict for d in gate.decisions] == [UNCHANGED]
    assert gate.environment == [
        "duckdb: 2.0.1 in the baseline, 2.0.2 now",
        "threads: 2 in the baseline, 8 now",
    ]
    assert gate.regressions == []


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
    assert (
        sum(1 for line in lines if line.startswith("::warning") and "more warnings" not in line)
        == 10
    )
    assert lines[-1] == "::warning title=twicerun::3 more warnings not shown; see the job summary"
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
    trials = [result(("safe", 0, 4)) for _ in range(3)]
    now = result(("safe", 0, 4), (HOSTILE, 4, 4))
    gate = evaluate({"pipelines/p.py": now}, baseline_of(trials), fail_on=["new", "not-comparable"])
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
    trials = [result(("safe", 0, 4)) for _ in range(3)]
    gate = evaluate(
        {"pipelines/p.py": result(("safe", 0, 4), (HOSTILE, 4, 4))},
        baseline_of(trials),
        fail_on=["not-comparable"],
    )
    (line,) = [line for line in commands(gate.annotations) if line.startswith("::error")]
    assert "\n" not in line
    properties, _message = line[len("::error ") :].split("::", 1)
    assert "," not in properties.split("title=")[1]
    assert ":" not in properties.split("title=")[1]


def test_the_comment_stays_under_githubs_limit_and_points_to_the_summary():
    steps = [(f"step_{i}_" + "x" * 200, i % 2, 4) for i in range(600)]
    trials = [result(*steps) for _ in range(2)]
    gate = evaluate({"pipelines/p.py": result(*steps)}, baseline_of(trials), fail_on=["new"])
    body = comment_body(gate, "pipelines/*.py", "https://github.test/run/1")
    assert len(body) < 65_536
    assert (
        "cut to keep this comment under GitHub's size limit; the [job summary](https://github.test/run/1) has every step."
        in body
    )
