"""The reference pipeline and its twins, at full size, through the real CLI."""

from __future__ import annotations

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def by_name(document):
    return {s["name"]: s for s in document["steps"]}


def test_the_reference_pipeline_fires_where_its_bugs_are(twicerun):
    outcome = twicerun("run", REPO / "pipelines" / "reference.py", "--json", "-")
    assert outcome.code == 1
    steps = by_name(outcome.json())
    assert len(steps) == 8
    assert (steps["make_inputs"]["fired"], steps["make_inputs"]["compared"]) == (0, 4)
    assert (steps["append_audit_log"]["fired"], steps["append_audit_log"]["compared"]) == (4, 4)
    assert steps["revenue_by_day"]["fired"] > 0
    assert steps["summarise_key_batches"]["fired"] == 0  # contained: step 2 cannot reach it


def test_the_twins_exit_zero_with_every_step_at_zero(twicerun):
    outcome = twicerun("run", REPO / "pipelines" / "twins.py", "--json", "-")
    assert outcome.code == 0, outcome.out
    assert [(s["fired"], s["compared"]) for s in outcome.json()["steps"]] == [(0, 4)] * 7
