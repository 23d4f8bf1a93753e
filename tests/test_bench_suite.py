"""bench/suite.py reads pytest's last line however the session ended, and rebuilds the
table of the artifact it wrote from that artifact's own figures."""

from __future__ import annotations

import json

import pytest
from conftest import REPO


@pytest.fixture
def suite(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from bench import suite

    return suite


@pytest.mark.parametrize(
    ("line", "seconds", "counts"),
    [
        ("1374 passed, 2 skipped in 305.05s (0:05:05)", 305.05, "1374 passed, 2 skipped"),
        (
            "=========== 3 failed, 10 passed, 1 error in 12.50s ===========",
            12.5,
            "3 failed, 10 passed, 1 error",
        ),
    ],
    ids=["quiet", "failures-with-rules"],
)
def test_the_session_line_is_read_quiet_or_with_failures(suite, line, seconds, counts):
    (found,) = suite.SESSION.finditer("....  [100%]\n" + line + "\n")
    assert float(found.group("seconds")) == seconds
    assert found.group("counts") == counts


def test_the_measured_artifact_rebuilds_its_own_table(suite):
    path = "results/experiments/bench-suite-2026-12-07.json"
    document = json.loads((REPO / path).read_text(encoding="utf-8"))
    assert suite.tables(path, document) == document["tables"]
    # Each count's row says how many of its runs passed, from the exit codes.
    rows = {row[0]: row for row in document["tables"][0]["rows"]}
    assert set(rows) == {"2", "3"}
    assert all(row[-1] == "3 of 3" for row in rows.values())
