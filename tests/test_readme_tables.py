"""Published figures: the README's and docs' generated tables match the committed artifacts,
and each artifact's tables are what its own script builds from its own figures."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from conftest import REPO


def test_every_readme_table_matches_the_committed_artifacts(twicerun, monkeypatch):
    monkeypatch.chdir(REPO)
    outcome = twicerun("report", "--check", "README.md")
    assert (outcome.code, outcome.err) == (0, "")


def test_the_readme_names_the_hook_it_offers():
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: twicerun-readme" in hooks
    assert "twicerun-readme" in (REPO / "README.md").read_text()


@pytest.mark.parametrize(
    ("kinds", "doc"),
    [
        (("gate-calibration", "gate-coins", "gate-resampled"), "docs/action.md"),
        (("verdicts",), "docs/verdicts.md"),
        (("tlc",), "docs/data.md"),
        (("bench-overlap",), "docs/runs.md"),
        (("bench-loop-spark_tiny",), "docs/spark.md"),
        (("bench-oracle-wide",), "docs/comparison.md"),
    ],
    ids=["gate", "verdicts", "tlc", "helper-measurement", "spark-costs", "wide-oracle"],
)
def test_the_tables_in_a_doc_match_the_newest_artifacts_of_their_kind(
    twicerun, monkeypatch, kinds, doc
):
    monkeypatch.chdir(REPO)
    newest = [sorted((REPO / "results").glob(f"{kind}-*.json"))[-1] for kind in kinds]
    outcome = twicerun("report", *newest, "--check", doc)
    assert (outcome.code, outcome.err) == (0, "")


def _script(name: str):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses in a script look their module up here
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return module


def _builder(schema: str):
    """The function that wrote an artifact's tables, by the artifact's schema."""
    if schema == "twicerun.eval/1":
        return _script("eval_tables").eval_tables
    if schema == "twicerun.gap/1":
        return _script("eval_tables").gap_tables
    if schema == "twicerun.bench-loop/1":
        from bench.loop import tables

        return tables
    if schema == "twicerun.bench-oracle/1":
        from bench.oracle import tables

        return tables
    if schema == "twicerun.bench-oracle-wide/1":
        from bench.oracle_wide import tables

        return tables
    if schema == "twicerun.bench-hook/1":
        from bench.hook import tables

        return tables
    if schema in ("twicerun.bench-isolation/1", "twicerun.bench-isolation/2"):
        from bench.isolation import tables

        return tables
    if schema == "twicerun.bench-overlap/1":
        from bench.overlap import tables

        return tables
    if schema == "twicerun.bench-race/1":
        from bench.race import tables

        return tables
    if schema == "twicerun.verdicts/1":
        return _script("verdicts").tables
    if schema == "twicerun.tlc/1":
        return _script("tlc_schema").tables
    if schema == "twicerun.spark-premise/1":
        return _script("measure_spark").tables
    if schema == "twicerun.gate-calibration/1":
        return lambda _path, d: _script("gate_calibration").tables(d)
    if schema == "twicerun.gate-coins/1":
        return lambda _path, d: [_script("gate_coins").table(d)]
    if schema == "twicerun.gate-resampled/1":
        return lambda _path, d: [_script("gate_resampled").table(d)]
    return None


CARRIERS = [
    p
    for p in sorted((REPO / "results").glob("*.json"))
    if "tables" in json.loads(p.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize("path", CARRIERS, ids=lambda p: p.name)
def test_an_artifacts_tables_are_rebuilt_from_its_own_figures(path, monkeypatch):
    # A table edited by hand in the JSON, or figures edited without their table, fail here:
    # the script's builder, run on the artifact's figures, must give back exactly its tables.
    monkeypatch.syspath_prepend(str(REPO))
    document = json.loads(path.read_text(encoding="utf-8"))
    build = _builder(document["schema"])
    assert build is not None, f"{path.name}: no script is known to build {document['schema']}"
    assert build(path.relative_to(REPO).as_posix(), document) == document["tables"]


def test_every_results_artifact_renders(twicerun, monkeypatch):
    monkeypatch.chdir(REPO)
    for path in sorted((REPO / "results").glob("*.json")):
        outcome = twicerun("report", str(path.relative_to(REPO)), "--format", "json")
        assert outcome.code == 0, (path.name, outcome.err)


def test_a_rate_over_trials_shows_every_bucket_of_one_denominator_and_only_seen_ones_of_several():
    distribution = _script("eval_tables").distribution
    assert (
        distribution([4, 3, 4], [4, 4, 4])
        == "4 of 4 ×2, 3 of 4 ×1, 2 of 4 ×0, 1 of 4 ×0, 0 of 4 ×0"
    )
    assert distribution([0, 0, 0], [4, 4, 4]) == "0 of 4 in all 3"
    # A bisect that stops once settled: 0 of 2 and 0 of 4 occurred, 2 of 2 never could.
    assert distribution([0, 0, 0], [2, 2, 4]) == "0 of 2 ×2, 0 of 4 ×1"
    assert distribution([None, 1], [None, 1]) == "1 of 1 ×1, 0 of 1 ×0, not compared ×1"


def test_pooling_overlap_artifacts_finds_a_real_gap_and_not_an_absent_one(tmp_path):
    """The rule that decided whether the connection helpers stay: a gap in fire counts
    between the settings is called unlikely by chance only when it is."""
    from bench.overlap import pooled

    def artifact(name, one, three):
        runs = lambda counts: [{"fired": {"s": [c, 4]}} for c in counts]  # noqa: E731
        path = tmp_path / name
        path.write_text(json.dumps({"reference": {"one": runs(one), "three": runs(three)}}))
        return str(path)

    lower = artifact("lower.json", [4] * 20, [2] * 20)
    same = artifact("same.json", [4, 3] * 10, [3, 4] * 10)
    (gap,) = pooled([lower], shuffles=2000)
    assert gap.startswith("s: one 80 of 80, three 40 of 80 over 20 and 20 invocations")
    assert gap.endswith("as low or lower in 0.000 of 2,000 shuffles")
    (none,) = pooled([same, same], shuffles=2000)
    assert "one 140 of 160, three 140 of 160 over 40 and 40" in none
    assert float(none.split(" in ")[-1].split()[0]) > 0.4
