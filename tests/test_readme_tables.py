"""The README's generated tables match the committed artifacts: a hand edit fails the build."""

from __future__ import annotations

from conftest import REPO


def test_every_readme_table_matches_the_committed_artifacts(twicerun, monkeypatch):
    monkeypatch.chdir(REPO)
    outcome = twicerun("report", "--check", "README.md")
    assert (outcome.code, outcome.err) == (0, "")


def test_the_readme_names_the_hook_it_offers():
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: twicerun-readme" in hooks
    assert "twicerun-readme" in (REPO / "README.md").read_text()


def test_the_eval_wall_time_for_ten_trials_is_in_the_readme_and_generated():
    import json

    readme = (REPO / "README.md").read_text()
    evals = sorted((REPO / "results").glob("eval-*.json"))
    document = json.loads(evals[-1].read_text())
    assert document["trials"] == 10
    block = readme.split("<!-- twicerun:eval-cost -->")[1].split("<!-- /twicerun:eval-cost -->")[0]
    assert f"| 10 | {document['seconds']:,.0f}s |" in block


def test_the_cost_ratio_in_the_readme_is_the_median_and_range_of_the_committed_bench():
    import json

    readme = (REPO / "README.md").read_text()
    document = json.loads(sorted((REPO / "results").glob("bench-loop-*.json"))[-1].read_text())
    ratios = [r["wall"] / r["steps"] for r in document["runs"]]
    median = document["median"]["wall"] / document["median"]["steps"]
    block = readme.partition("<!-- twicerun:bench-loop -->")[2].partition("<!-- /twicerun:bench")[0]
    expected = f"| {median:.2f}x ({min(ratios):.2f}x to {max(ratios):.2f}x) |"
    assert f"| the whole invocation | {document['median']['wall']:.1f}s |" in block
    assert expected in block


def test_the_gate_figures_in_docs_action_md_match_the_newest_gate_artifacts(twicerun, monkeypatch):
    monkeypatch.chdir(REPO)
    newest = [
        sorted((REPO / "results").glob(f"{kind}-*.json"))[-1]
        for kind in ("gate-calibration", "gate-coins")
    ]
    outcome = twicerun("report", *newest, "--check", "docs/action.md")
    assert (outcome.code, outcome.err) == (0, "")
