"""bench/isolation.py groups executions as the loop does and renders both artifact schemas."""

from __future__ import annotations

import json

import pytest
from conftest import REPO


@pytest.fixture
def isolation(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from bench import isolation

    monkeypatch.setattr(isolation, "ROWS", 2_000)
    monkeypatch.setattr(isolation, "INPUTS", {"dense": 4, "sparse": 1_000})
    return isolation


def test_executions_are_compared_in_groups_of_five_against_the_groups_first(isolation):
    figures = isolation.measure(trials=7, setups=2)
    # Runs 1..5 are a group (four comparisons), runs 6..7 a new one (one comparison).
    assert figures["compared"] == 5
    assert figures["group"] == 5
    assert set(figures["differing"]) == {
        "fresh/nothing",
        "fresh/opening",
        "pooled/nothing",
        "pooled/opening",
    }
    for counts in figures["differing"].values():
        assert set(counts) == {"dense", "sparse"}
        assert all(0 <= n <= 5 for n in counts.values())
    assert set(figures["setup_ms"]) == {"fresh", "pooled"}


def test_a_first_schema_artifact_keeps_its_own_table(isolation):
    path = REPO / "results" / "bench-isolation-2026-12-01.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    (table,) = isolation.tables(str(path.relative_to(REPO)), document)
    assert table["headers"][-1] == "differing answers, 2 rows per key"
    assert len(table["rows"]) == 2


def test_the_second_schema_has_a_row_per_mechanism_and_what_is_beside_it(isolation):
    document = {
        "schema": "twicerun.bench-isolation/2",
        "trials": 10,
        "setups": 3,
        "rows": 2_000,
        "group": 5,
        "compared": 8,
        "setup_ms": {"fresh": {"open": 9.0, "close": 2.0}, "pooled": {"open": 0.5, "close": 0.2}},
        "differing": {
            "fresh/nothing": {"dense": 1, "sparse": 2},
            "fresh/opening": {"dense": 3, "sparse": 4},
            "pooled/nothing": {"dense": 5, "sparse": 6},
            "pooled/opening": {"dense": 7, "sparse": 8},
        },
    }
    (table,) = isolation.tables("results/x.json", document)
    assert [row[0] for row in table["rows"]] == [
        "a new in-memory DuckDB per execution, nothing beside",
        "a new in-memory DuckDB per execution, one DuckDB opened beside",
        "a new cursor and attached catalog on one live DuckDB, nothing beside",
        "a new cursor and attached catalog on one live DuckDB, one DuckDB opened beside",
    ]
    assert [row[3:] for row in table["rows"]] == [
        ["1 of 8", "2 of 8"],
        ["3 of 8", "4 of 8"],
        ["5 of 8", "6 of 8"],
        ["7 of 8", "8 of 8"],
    ]
