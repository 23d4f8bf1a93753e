"""--without: an amplifier left out while the others run, and said to be left out everywhere
a reader could take its absence for a clean zero."""

from __future__ import annotations

import json

from conftest import FIRST_PER_CUSTOMER


def amplifiers(document: dict, step: str) -> dict[str, dict]:
    (found,) = [s for s in document["steps"] if s["name"] == step]
    return {a["kind"]: a for a in found["amplifiers"]}


def test_an_amplifier_left_out_does_not_run_and_every_report_says_so(write_pipeline, twicerun):
    """first_event changes only when its rows arrive in another order: without arrival
    order it stays quiet, and the report must not let that read as a clean bill."""
    path = write_pipeline(FIRST_PER_CUSTOMER)
    caught = twicerun("run", path, "--runs", "3", "--amplify", "--json", "-")
    assert amplifiers(caught.json(), "first_event")["arrival order"]["fired"] > 0

    written = path.parent / "result.json"
    outcome = twicerun(
        "run", path, "--runs", "3", "--amplify", "--without", "arrival-order", "--json", written
    )
    assert outcome.code == 0, outcome.err
    assert (
        "arrival order"
        not in outcome.out.split("amplification, on the steps")[1].split(
            "NO_DIVERGENCE_OBSERVED counts"
        )[0]
    )
    assert (
        "; not varied (declined or not run): file order, arrival order (--without)" in outcome.out
    )
    assert "arrival order on any step (--without)" in outcome.out

    document = json.loads(written.read_text())
    assert document["amplifiers_off"] == ["arrival order"]
    assert "arrival order" not in amplifiers(document, "first_event")
    assert "arrival order on any step (--without)" in document["not_varied"]


def test_rescoring_under_another_policy_keeps_what_was_left_out(write_pipeline, twicerun):
    path = write_pipeline(FIRST_PER_CUSTOMER)
    run = twicerun(
        "run", path, "--runs", "3", "--amplify", "--without", "file-order", "--json", "-"
    ).json()
    rejudged = twicerun("judge", run["artifacts"], "--policy", "reduction-order", "--json", "-")
    assert rejudged.code == 4, rejudged.err  # STABLE_ON_THIS_INPUT, under either policy
    assert "file order on any step (--without)" in rejudged.json()["not_varied"]


def test_without_thread_count_each_remaining_amplifier_probes_on_its_own(write_pipeline, twicerun):
    """The joint probe is built on the raised thread count: without it there is none."""
    path = write_pipeline(FIRST_PER_CUSTOMER)
    document = twicerun(
        "run", path, "--runs", "3", "--amplify", "--without", "thread-count", "--json", "-"
    ).json()
    stressed = amplifiers(document, "first_event")
    assert sorted(stressed) == ["arrival order", "file order", "row multiplication", "tie collapse"]
    assert all(a["probed_with"] == [] for a in stressed.values())
    assert all(a["threads"] == document["environment"]["threads"] for a in stressed.values())
    assert stressed["arrival order"]["fired"] > 0
    assert document["steps"][1]["status"] == "STABLE_ON_THIS_INPUT"


def test_the_rest_of_the_joint_probe_runs_without_the_member_left_out(write_pipeline, twicerun):
    path = write_pipeline(FIRST_PER_CUSTOMER)
    document = twicerun(
        "run", path, "--runs", "3", "--amplify", "--without", "row-multiplication", "--json", "-"
    ).json()
    stressed = amplifiers(document, "first_event")
    assert "row multiplication" not in stressed
    # The joint probe fired (arrival order moves the step), so each member then ran alone;
    # its inputs held as many rows as the step's own, none doubled.
    assert stressed["arrival order"]["fired"] > 0
    assert "rows to" not in " ".join(a["detail"] or "" for a in stressed.values())


def test_without_and_no_amplify_together_is_one_sentence_and_exit_2(write_pipeline, twicerun):
    path = write_pipeline(FIRST_PER_CUSTOMER)
    outcome = twicerun("run", path, "--no-amplify", "--without", "file-order")
    assert outcome.code == 2
    assert (
        "--without file-order turns amplifiers off, and --no-amplify already runs none; "
        "drop one of the two"
    ) in outcome.err


def test_an_amplifier_name_that_does_not_exist_lists_the_ones_that_do(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify", "--without", "ties")
    assert outcome.code == 2
    for name in (
        "tie-collapse",
        "thread-count",
        "row-multiplication",
        "arrival-order",
        "file-order",
    ):
        assert name in outcome.err
