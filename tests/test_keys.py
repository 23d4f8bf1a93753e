"""--key: matching an artifact on a subset of its exact columns, and the refusals, early."""

from __future__ import annotations

from pathlib import Path

import pytest

# Step 0 writes keys whose surrogate moves on every run; step 1 must never run when a
# --key typo can be caught after step 0, which its marker file proves.
PIPELINE = """
import itertools
from pathlib import Path

_calls = itertools.count()


def keyed(ctx):
    shift = next(_calls)
    ctx.write(
        "keys",
        f"SELECT range AS event_id, range % 3 AS customer, (range + {shift}) % 10 AS surrogate, "
        f"(range * 0.5)::DOUBLE AS amount FROM range(10)",
    )


def after(ctx):
    Path(__file__).with_name("after-ran").touch()
    ctx.read("keys")
    ctx.write("count", "SELECT count(*) AS n FROM keys")
"""


def invocations(run_dir: Path) -> list[Path]:
    return (
        [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
        if run_dir.exists()
        else []
    )


def test_a_key_that_leaves_out_the_surrogate_makes_the_step_quiet(write_pipeline, twicerun):
    path = write_pipeline(PIPELINE)
    plain = twicerun("run", path, "--runs", "3", "--json", "-").json()["steps"][0]
    assert plain["fired"] == 2
    keyed = twicerun(
        "run", path, "--runs", "3", "--key", "keys=event_id,customer", "--json", "-"
    ).json()
    assert keyed["keys"] == {"keys": ["event_id", "customer"]}
    assert keyed["steps"][0]["fired"] == 0


def test_the_report_says_a_key_is_in_force_and_what_it_left_out_of_a_quiet_step(
    write_pipeline, twicerun
):
    # The step above was reported NO_DIVERGENCE_OBSERVED with nothing beside it, and the
    # header did not name the --key: a reader could not tell its surrogate had moved.
    path = write_pipeline(PIPELINE)
    out = twicerun(
        "run", path, "--runs", "3", "--no-amplify", "--key", "keys=event_id,customer"
    ).out.splitlines()
    assert (
        "keys       keys matched on event_id, customer (--key): their other exact columns "
        "are not compared"
    ) in out
    assert (
        "        keys: differed in 2 of 2 comparisons, only in the columns --key leaves out "
        "(surrogate), so counted as the same answer"
    ) in out


def test_an_unknown_artifact_is_refused_before_any_step_runs(write_pipeline, twicerun, run_dir):
    path = write_pipeline(PIPELINE)
    outcome = twicerun("run", path, "--key", "kyes=event_id")
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: --key kyes=...: no step of {path} writes an artifact called kyes; "
        f"it writes count, keys\n"
    )
    assert invocations(run_dir) == []


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (
            "keys=event_id,custmer",
            "--key keys=event_id,custmer: keys has no column custmer; its exact columns are "
            "event_id, customer, surrogate",
        ),
        (
            "keys=event_id,amount",
            "--key keys=event_id,amount: amount is a float column, and matching rows on it would "
            "turn one ulp of float drift into a missing row and an extra one; key on exact "
            "columns only (event_id, customer, surrogate)",
        ),
    ],
)
def test_a_bad_column_is_refused_before_running_when_an_earlier_run_knows_the_schema(
    write_pipeline, twicerun, run_dir, flag, message
):
    path = write_pipeline(PIPELINE)
    assert twicerun("run", path, "--runs", "2").code == 1
    (path.parent / "after-ran").unlink()
    before = invocations(run_dir)
    outcome = twicerun("run", path, "--key", flag)
    assert outcome.code == 2
    assert outcome.err == f"twicerun: {message}\n"
    assert invocations(run_dir) == before  # nothing was even started
    assert not (path.parent / "after-ran").exists()


def test_on_a_first_run_a_bad_column_stops_right_after_the_step_that_writes_it(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline(PIPELINE)
    outcome = twicerun("run", path, "--key", "keys=amount")
    assert outcome.code == 2
    assert outcome.err.startswith("twicerun: --key keys=amount: amount is a float column")
    assert not (path.parent / "after-ran").exists()


@pytest.mark.parametrize("flag", ["keys", "keys=", "=event_id"])
def test_a_malformed_key_flag_is_refused(write_pipeline, twicerun, flag):
    outcome = twicerun("run", write_pipeline(PIPELINE), "--key", flag)
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: --key {flag!r}: write ARTIFACT=COLUMN[,COLUMN...], as in "
        f"--key customer_keys=event_id,customer\n"
    )


# The same steps, with two key columns whose names are not one word (escaped for the
# f-string they sit in).
ODD_NAMES = PIPELINE.replace("range AS event_id", r"range AS \"event, id\"").replace(
    "range % 3 AS customer", r"range % 3 AS \"say \"\"hi\"\"\""
)


def test_a_column_whose_name_is_not_one_word_is_keyed_as_the_report_shows_it(
    write_pipeline, twicerun
):
    """The refusal listed `event, id` bare, which --key splits at its comma: no column
    holding a comma could be keyed. Names are shown in SQL's double quotes, and --key takes
    them back in that form."""
    path = write_pipeline(ODD_NAMES)
    outcome = twicerun("run", path, "--runs", "2", "--key", "keys=event")
    assert outcome.code == 2
    assert outcome.err.startswith(
        'twicerun: --key keys=event: keys has no column event; its exact columns are "event, id", '
        '"say ""hi""", surrogate\n'
    )
    keyed = twicerun(
        "run", path, "--runs", "3", "--no-amplify", "--key", 'keys= "event, id" ,"say ""hi"""'
    )
    assert keyed.code == 0, keyed.err
    assert 'keys       keys matched on "event, id", "say ""hi""" (--key)' in keyed.out
    flagged = ("--key", 'keys=surrogate,"event, id"', "--json", "-")
    document = twicerun("run", path, "--runs", "3", "--no-amplify", *flagged).json()
    assert document["keys"] == {"keys": ["surrogate", "event, id"]}
    assert document["steps"][0]["fired"] == 2


@pytest.mark.parametrize(
    ("flag", "problem"),
    [
        ('keys="event, id', "a quoted column name has no closing double quote"),
        ('keys="event, id"x', "a quoted column name is followed by 'x'; put a comma"),
    ],
)
def test_a_badly_quoted_key_column_is_refused(write_pipeline, twicerun, flag, problem):
    outcome = twicerun("run", write_pipeline(ODD_NAMES), "--key", flag)
    assert outcome.code == 2
    assert outcome.err.startswith(f"twicerun: --key {flag!r}: {problem}")


def test_when_artifact_names_are_not_literal_the_check_waits_for_run_1(write_pipeline, twicerun):
    path = write_pipeline(
        """
        NAME = "computed"


        def dynamic(ctx):
            ctx.write(NAME, "SELECT 1 AS a")
        """
    )
    outcome = twicerun("run", path, "--key", "missing=a")
    assert outcome.code == 2
    assert (
        "twicerun: --key missing=...: no step wrote an artifact called missing in run 1"
        in outcome.err
    )
