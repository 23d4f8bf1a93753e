"""The terminal report is a rendering of the Result and nothing else."""

from __future__ import annotations

import json
from dataclasses import replace

from twicerun.render.terminal import render_run
from twicerun.result import Environment, Result, StepResult, load_result

PIPELINE = """
import itertools

_calls = itertools.count()


def moving(ctx):
    ctx.write("n", f"SELECT {next(_calls)} AS v")


def still(ctx):
    ctx.write("m", "SELECT 1 AS v")
"""


def test_the_printed_report_is_the_result_json_rendered(write_pipeline, twicerun, tmp_path):
    path = write_pipeline(PIPELINE)
    saved = tmp_path / "result.json"
    outcome = twicerun("run", path, "--runs", "3", "--json", saved)
    assert outcome.code == 1
    assert render_run(load_result(saved)) == outcome.out


def test_the_result_carries_the_documented_fields(write_pipeline, twicerun):
    path = write_pipeline(PIPELINE)
    document = twicerun("run", path, "--runs", "3", "--json", "-").json()
    assert document["schema"] == "twicerun.result/1"
    assert {"pipeline", "runs", "contained", "policy", "environment", "seconds", "steps"} <= set(
        document
    )
    assert set(document["environment"]) == {
        "duckdb",
        "threads",
        "platform",
        "python",
        "twicerun",
        "engine",
        "spark",
        "spark_master",
    }
    assert (document["environment"]["engine"], document["environment"]["spark"]) == ("duckdb", None)
    moving, still = document["steps"]
    assert {k: moving[k] for k in ("index", "name", "line", "fired", "compared", "status")} == {
        "index": 0,
        "name": "moving",
        "line": 6,
        "fired": 2,
        "compared": 2,
        "status": "DIVERGENT",
    }
    # A module-level counter moves the answer, so one thread does not stop it.
    assert (moving["classes"], moving["cause"]) == (
        ["ROW_MISSING", "ROW_EXTRA"],
        "PERSISTS_SINGLE_THREADED",
    )
    assert (still["fired"], still["status"], still["line"]) == (0, "NO_DIVERGENCE_OBSERVED", 10)


def a_result(**fields) -> Result:
    """A contained, strict Result at threads=2 on DuckDB 2.0.1; `fields` give the rest."""
    return Result(
        contained=True,
        policy="strict",
        environment=Environment("2.0.1", 2, "Linux-x86_64", "3.11.7", "0.1.0"),
        **fields,
    )


def test_a_result_survives_a_json_round_trip():
    result = Result(
        pipeline="p.py",
        runs=3,
        contained=True,
        policy="strict",
        environment=Environment("2.0.1", 2, "Linux", "3.11.7", "0.1.0"),
        seconds=1.25,
        steps=[StepResult(index=0, name="a", line=1, fired=1, compared=2, status="DIVERGENT")],
    )
    again = Result.from_dict(json.loads(result.to_json()))
    assert again == result


def test_step_names_line_up_in_every_list_once_indices_reach_two_digits():
    quiet = [
        StepResult(
            index=i, name=f"s{i}", line=i, fired=0, compared=4,
            status="NO_DIVERGENCE_OBSERVED", zero_bound=0.5271,
        )
        for i in (0, 10)
    ]  # fmt: skip
    result = a_result(
        pipeline="p.py",
        runs=5,
        seconds=1.0,
        steps=quiet,
        amplified=False,
    )
    lines = render_run(result).splitlines()
    assert "   0 s0   0 of 4  NO_DIVERGENCE_OBSERVED" in lines
    assert (
        "   0 s0   varied: the loop 0 of 4; not varied (declined or not run): every amplifier"
        in lines
    )
    assert (
        "  10 s10  varied: the loop 0 of 4; not varied (declined or not run): every amplifier"
        in lines
    )


def test_the_report_has_the_documented_shape_exactly():
    result = a_result(
        pipeline="pipelines/p.py",
        runs=5,
        seconds=3.04,
        step_seconds=2.5,
        artifacts=".twicerun/20261129-000000-abcd",
        confidence=0.95,
        steps=[
            StepResult(
                index=0,
                name="inputs",
                line=1,
                fired=0,
                compared=4,
                status="NO_DIVERGENCE_OBSERVED",
                zero_bound=0.5271,
            ),
            StepResult(
                index=1, name="total_by_day", line=5, fired=3, compared=4, status="DIVERGENT"
            ),
            StepResult(index=2, name="nothing", line=9, fired=0, compared=0, status=None),
        ],
        amplified=False,
        not_varied=["DuckDB version", "wall clock", "every amplifier (--no-amplify)"],
    )
    assert render_run(result) == (
        "pipeline   pipelines/p.py\n"
        "runs       5: run 1 is the reference and each later run is compared with it, "
        "4 comparisons per step\n"
        "contained  yes: runs 2 to 5 read run 1's upstream artifacts, so a difference cannot "
        "travel to the steps after it\n"
        "policy     strict: any difference in any artifact counts\n"
        "engine     DuckDB 2.0.1 at threads=2\n"
        "platform   Linux-x86_64, Python 3.11.7, twicerun 0.1.0\n"
        "artifacts  .twicerun/20261129-000000-abcd\n"
        "\n"
        "  0 inputs        0 of 4  NO_DIVERGENCE_OBSERVED\n"
        "  1 total_by_day  3 of 4  DIVERGENT\n"
        "  2 nothing       not compared: no run wrote an artifact\n"
        "\n"
        "amplification: not run (--no-amplify), so every quiet step below is quiet on this "
        "input only.\n"
        "\n"
        "NO_DIVERGENCE_OBSERVED counts what was tried and lists what was not; it does not say the code is right:\n"
        "  0 inputs  varied: the loop 0 of 4; not varied (declined or not run): every amplifier\n"
        "  4 clean comparisons leave the per-comparison rate anywhere up to 53 percent "
        "(95 percent, one-sided; runs on one machine are not independent).\n"
        "\n"
        "1 of 3 steps diverged, in 3.0s (2.5s of it inside step executions).\n"
        "Not varied by this invocation, whatever a step's status says: DuckDB version, "
        "wall clock, every amplifier (--no-amplify).\n"
    )


def test_three_runs_are_named_as_a_sentence_names_them():
    # "runs 2 to 3 read run 1's upstream artifacts".
    result = a_result(pipeline="p.py", runs=3, seconds=0.1, steps=[])
    (contained,) = [
        line for line in render_run(result).splitlines() if line.startswith("contained")
    ]
    assert contained.startswith("contained  yes: runs 2 and 3 read run 1's upstream artifacts")
    four = replace(result, runs=4)
    assert "yes: runs 2 to 4 read run 1's" in render_run(four)


def test_one_clean_comparison_is_singular_in_the_zero_bound_line():
    result = a_result(
        pipeline="p.py",
        runs=2,
        seconds=1.0,
        confidence=0.95,
        steps=[
            StepResult(
                index=0,
                name="only",
                line=1,
                fired=0,
                compared=1,
                status="NO_DIVERGENCE_OBSERVED",
                zero_bound=0.95,
            )
        ],
        amplified=False,
    )
    assert (
        "  1 clean comparison leaves the per-comparison rate anywhere up to 95 percent "
        "(95 percent, one-sided; runs on one machine are not independent)."
    ) in render_run(result).splitlines()


def test_a_result_with_an_unknown_schema_is_refused(tmp_path):
    import pytest

    from twicerun.result import ResultFormatError

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": "twicerun.result/9"}))
    with pytest.raises(ResultFormatError) as info:
        load_result(path)
    assert str(info.value) == (
        "this Result has schema 'twicerun.result/9', and this twicerun reads "
        "'twicerun.result/1'; use the twicerun that wrote it, or re-run the pipeline"
    )
    # Without the field it said "(schema None)".
    path.write_text("{}")
    with pytest.raises(ResultFormatError) as info:
        load_result(path)
    assert str(info.value) == (
        "not a twicerun Result (no schema field); expected schema 'twicerun.result/1'"
    )


def _flipping(write_pipeline, first: str, second: str):
    return write_pipeline(
        "import itertools\n\n_c = itertools.count()\n\n\n"
        "def a(ctx):\n"
        "    n = next(_c)\n"
        f"    rows = {second!r} if n % 2 else {first!r}\n"
        "    ctx.write('x', f'SELECT * FROM (VALUES {rows}) t(k, v)')\n"
    )


def test_a_negative_zero_shows_its_sign(write_pipeline, twicerun):
    path = _flipping(write_pipeline, "(1, 0.0::DOUBLE)", "(1, -0.0::DOUBLE)")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 1
    assert "0.0 against -0.0" in outcome.out


def test_the_relative_figure_printed_is_the_shown_pairs_own(write_pipeline, twicerun):
    # Pair 1 moves one ulp off zero (relative 1); pair 2 moves 2**51 ulps (relative
    # 1/3). The line shows pair 2, so its relative figure must be pair 2's.
    path = _flipping(
        write_pipeline,
        "(1, 0.0::DOUBLE), (2, 1.5::DOUBLE)",
        "(1, 5e-324::DOUBLE), (2, 1.0::DOUBLE)",
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 1
    assert "0.333 relative, 1.5 against 1.0" in outcome.out, outcome.out


def test_the_amplification_header_says_the_runs_it_made(write_pipeline, twicerun):
    path = write_pipeline(
        "def a(ctx):\n    ctx.write('t', 'SELECT range AS v FROM range(50)')\n\n\n"
        "def b(ctx):\n    ctx.read('t')\n    ctx.write('s', 'SELECT sum(v) AS s FROM t')\n"
    )
    outcome = twicerun("run", path, "--runs", "2", "--amplify")
    assert "amplification, on the steps the loop found quiet (2 runs each):" in outcome.out
    outcome = twicerun("run", path, "--runs", "5", "--amplify")
    assert (
        "amplification, on the steps the loop found quiet (3 runs each, continuing to 5 when "
        "one fires):" in outcome.out
    )


def _seeded(**step) -> Result:
    """A five-run Result of one step, `sample`, seeded at 42."""
    return a_result(
        pipeline="pipelines/p.py",
        runs=5,
        seconds=1.0,
        steps=[StepResult(index=0, name="sample", line=3, compared=4, seed=42, **step)],
    )


def test_a_seeded_step_steady_at_one_thread_is_not_told_its_seed_does_nothing():
    def seeded(cause: str) -> Result:
        return _seeded(fired=2, status="DIVERGENT", cause=cause)

    pad = " " * 8
    # At one thread the bisect saw it hold still: the seed does control it, there.
    assert (
        f"{pad}the seed was held at 42 in every run and the result moved anyway at threads=2, "
        "but not with one thread: the seed holds this step still only there"
    ) in render_run(seeded("PARALLEL_ORDER")).splitlines()
    assert (
        f"{pad}the seed was held at 42 in every run and the result moved anyway, so the seed does "
        "not control this step"
    ) in render_run(seeded("PERSISTS_SINGLE_THREADED")).splitlines()


def test_a_seeded_step_that_stayed_quiet_says_its_seed_was_held():
    # It printed a bare NO_DIVERGENCE_OBSERVED, which read as a step that cannot change.
    result = _seeded(fired=0, status="NO_DIVERGENCE_OBSERVED")
    assert (
        " " * 8 + "the seed was held at 42 in every run, so its runs agreeing says nothing of "
        "another seed (--seed sample=N draws other numbers)"
    ) in render_run(result).splitlines()
    unseeded = render_run(replace(result, steps=[replace(result.steps[0], seed=None)]))
    assert "the seed was held" not in unseeded


def test_a_bound_outside_says_what_it_points_at_and_one_inside_says_nothing_more():
    """A quantile over a sample (reservoir_quantile) moved 0.35 relative and the report
    printed only "OUTSIDE" under the bound, which read as float drift gone large."""
    from twicerun.judge.bound import figures

    def rendered(relative: float) -> list[str]:
        bound = figures("quant", "med", "double", relative, 200_000, 50)
        return render_run(
            _seeded(fired=1, status="DIVERGENT", cause="PARALLEL_ORDER", bounds=[bound])
        ).splitlines()

    outside = rendered(0.348)
    at = outside.index("  0 sample, quant.med: observed 0.348")
    assert outside[at + 3 : at + 5] == [
        "      OUTSIDE: more than adding the same terms in another order can move a sum, unless",
        "      they cancel; the values themselves changed (first(), a sample, a running total over ties)",
    ]
    assert not any(line.startswith("      OUTSIDE:") for line in rendered(1e-15))


def test_what_a_step_prints_goes_to_stderr_so_json_on_stdout_stays_a_document(
    write_pipeline, twicerun
):
    path = write_pipeline(
        """
        def chatty(ctx):
            print("processing chatty...")
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert json.loads(outcome.out)["schema"] == "twicerun.result/1"
    assert outcome.err.splitlines().count("processing chatty...") == 2
    report = twicerun("run", path, "--runs", "2")
    assert "processing chatty..." not in report.out
    assert report.out.startswith("pipeline   ")


def test_what_a_pipeline_prints_as_it_is_imported_goes_to_stderr_too(
    write_pipeline, twicerun, run_dir
):
    # A top-level print (a banner, a config dump) landed on stdout ahead of the document.
    path = write_pipeline(
        """
        print("loading config")


        def a(ctx):
            ctx.write("x", "SELECT 1 AS v")
        """
    )
    for verb in (["run", path, "--runs", "2", "--no-amplify"], ["audit", path]):
        outcome = twicerun(*verb, "--json", "-")
        assert json.loads(outcome.out)["pipeline"] == str(path), verb
        assert "loading config" in outcome.err.splitlines()
    (invocation,) = [p for p in run_dir.iterdir() if p.is_dir()]
    outcome = twicerun("reproduce", invocation, "--json", "-")
    assert json.loads(outcome.out)["schema"] == "twicerun.reproduce/1"
    assert "loading config" in outcome.err.splitlines()


def test_an_amplifier_line_over_many_inputs_shows_its_first_parts_and_counts_the_rest():
    """A step reading 300 artifacts printed what each amplifier did to every one of them on
    one line, 40,000 characters of it. The line now stops near a thousand and says how many
    parts the Result holds beside; a line within that is printed whole, as before."""
    from twicerun.result import Series
    from twicerun.vocabulary.loop import Amplifier

    many = "; ".join(f"part_{k} 100 rows to 200, i moved past its range" for k in range(300))
    few = "; ".join(f"part_{k} 100 rows to 200, i moved past its range" for k in range(3))
    declined = "; ".join(f"part_{k} has no exact column besides its keys" for k in range(300))

    def rendered(detail: str) -> list[str]:
        step = StepResult(
            index=0, name="fan_in", line=1, fired=0, compared=4, status="NO_DIVERGENCE_OBSERVED",
            amplifiers=[
                Series(kind=Amplifier.ROW_MULTIPLICATION, threads=2, runs=3, compared=2, detail=detail),
                Series(kind=Amplifier.TIE_COLLAPSE, threads=2, declined=declined),
            ],
        )  # fmt: skip
        return render_run(a_result(pipeline="p.py", runs=5, seconds=1.0, steps=[step])).splitlines()

    (line,) = [x for x in rendered(many) if x.lstrip().startswith("row multiplication")]
    assert len(line) < 1100
    shown = line.partition("0 of 2: ")[2]
    assert shown.startswith("part_0 100 rows to 200, i moved past its range; part_1 ")
    kept = shown.count("; ")
    assert shown.endswith(f"; and {300 - kept} more, which the Result (--json) holds")
    (line,) = [x for x in rendered(many) if x.lstrip().startswith("tie collapse")]
    assert len(line) < 1100 and line.endswith("more, which the Result (--json) holds")
    (line,) = [x for x in rendered(few) if x.lstrip().startswith("row multiplication")]
    assert line.endswith(f"0 of 2: {few}")


def test_a_step_with_many_artifacts_that_differed_describes_five_and_counts_the_rest(
    write_pipeline, twicerun, tmp_path
):
    """A step writing 200 artifacts that all differed printed two lines for each, 400 lines
    under one step. Five are described; one line names how many more, which, and the classes
    they showed, which a reader would otherwise not know were there."""
    path = write_pipeline(
        "def fan_out(ctx):\n"
        "    for k in range(8):\n"
        "        ctx.write(f'same_{k}', 'SELECT 1 AS v')\n"
        "        ctx.write(f'part_{k}', 'SELECT i, (random() < 0.5)::INT + i * 10 AS v FROM range(40) t(i)')\n"
        "    ctx.write('gone', 'SELECT i FROM range(40) t(i) WHERE random() < 0.5')\n"
    )
    saved = tmp_path / "result.json"
    lines = twicerun("run", path, "--runs", "2", "--no-amplify", "--json", saved).out.splitlines()
    described = [x.strip().partition(":")[0] for x in lines if x.strip().startswith("part_")]
    assert described == [f"part_{k}" for k in range(5)]
    assert (
        " " * 8 + "4 more artifacts differed too (part_5, part_6, part_7 and 1 more), showing "
        "ROW_MISSING ROW_EXTRA; the Result (--json) has what each showed"
    ) in lines
    (comparison,) = json.loads(saved.read_text())["steps"][0]["comparisons"]
    assert sum(a["differs"] for a in comparison["artifacts"]) == 9
