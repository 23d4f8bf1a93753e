"""The pre-commit hook, through the real `pre-commit run`, in repositories made for the test.

pre-commit installs the hook into a fresh virtualenv with pip. The network is not
touched: pip is told to use no index and to find every dependency in
.venv/wheelhouse, which the README's test line builds before the tests run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from twicerun.result import Environment, Result, StepResult

pytestmark = pytest.mark.slow

WHEELHOUSE = REPO / ".venv" / "wheelhouse"
GIT = [
    "git",
    "-c",
    "user.name=twicerun tests",
    "-c",
    "user.email=tests@twicerun.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "init.defaultBranch=main",
]


def run(args, cwd, env=None, check=True):
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{args} failed:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This project as it stands in the working tree, committed once into a scratch repository."""
    if not any(WHEELHOUSE.glob("duckdb-*.whl")):
        pytest.fail(
            f"{WHEELHOUSE} has no wheels: run the README's test line, which builds it, so that "
            f"pre-commit can install the hook without the network"
        )
    target = tmp_path_factory.mktemp("hook-repo")
    listed = run(["git", "ls-files", "-co", "--exclude-standard"], REPO).stdout.splitlines()
    for name in listed:
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    run([*GIT, "init", "-q"], target)
    run([*GIT, "add", "-A"], target)
    run([*GIT, "commit", "-q", "-m", "snapshot for the hook test"], target)
    return target


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("pre-commit-home")
    return {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Byte-compiling pyarrow and friends is most of an install; the hook runs once.
        "PIP_NO_COMPILE": "1",
    }


def a_result() -> Result:
    """A small Result of one quiet step, as a consumer's results/ would hold."""
    return Result(
        pipeline="pipelines/p.py",
        runs=3,
        contained=True,
        policy="strict",
        environment=Environment("2.0.1", 2, "Linux", "3.11.7", "0.1.0"),
        seconds=1.0,
        steps=[
            StepResult(
                index=0, name="load", line=1, fired=0, compared=2, status="NO_DIVERGENCE_OBSERVED"
            )
        ],
    )


def twicerun_cli(*args, cwd):
    return run([sys.executable, "-m", "twicerun", *args], cwd, check=False)


def run_hook_each(hook_repo: Path, consumers: list[Path], env: dict[str, str], config: Path):
    """`pre-commit run --all-files` in every consumer at once, one process each, all with a
    config that names this project's snapshot at its commit, as a consumer's config names
    a tag.

    pre-commit installs a hook once per repository and revision into its store (about
    15 s here, most of it unpacking duckdb and pyarrow) and takes a lock while it does:
    the first process installs, the others wait for it and reuse the install, and so does
    every later test in this module, which shares the store.
    """
    rev = run([*GIT, "rev-parse", "HEAD"], hook_repo).stdout.strip()
    config.write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n      - id: twicerun-readme\n"
    )
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--config", str(config)]
    started = [
        subprocess.Popen(
            command, cwd=c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for c in consumers
    ]
    return [(process.wait(), process.communicate()[0]) for process in started]


def test_the_hook_passes_a_clean_readme_fails_every_way_it_can_go_stale_and_passes_here(
    hook_repo, env, tmp_path
):
    consumer = tmp_path / "consumer"
    (consumer / "results").mkdir(parents=True)
    result = a_result()
    (consumer / "results" / "result.json").write_text(result.to_json())
    other_result = Result(**{**result.__dict__, "pipeline": "pipelines/q.py"})
    (consumer / "results" / "other.json").write_text(other_result.to_json())
    (consumer / "README.md").write_text(
        "# Consumer\n\n<!-- twicerun:steps-p -->\n<!-- /twicerun:steps-p -->\n\n"
        "<!-- twicerun:steps-q -->\n<!-- /twicerun:steps-q -->\n"
    )
    assert twicerun_cli("report", "--update", "README.md", cwd=consumer).returncode == 0
    run([*GIT, "init", "-q"], consumer)
    run([*GIT, "add", "-A"], consumer)
    run([*GIT, "commit", "-q", "-m", "tables"], consumer)
    generated = (consumer / "README.md").read_text()

    clean, edited, orphaned, regenerated = (tmp_path / n for n in ("c", "e", "o", "r"))
    for copy in (clean, edited, orphaned, regenerated):
        shutil.copytree(consumer, copy, symlinks=True)
    (edited / "README.md").write_text(generated.replace("| 0 of 2 |", "| 2 of 2 |", 1))
    (orphaned / "results" / "other.json").unlink()
    (regenerated / "README.md").write_text(generated.replace("| 0 of 2 |", "| 2 of 2 |"))
    assert twicerun_cli("report", "--update", "README.md", cwd=regenerated).returncode == 0
    assert (regenerated / "README.md").read_text() == generated

    # The fifth consumer is this project's committed tree, its README checked by the hook.
    outcomes = run_hook_each(
        hook_repo, [clean, edited, orphaned, regenerated, hook_repo], env, tmp_path / "hook.yaml"
    )
    (clean_code, clean_out), (edited_code, edited_out) = outcomes[:2]
    (orphaned_code, orphaned_out), (regenerated_code, regenerated_out) = outcomes[2:4]
    own_code, own_out = outcomes[4]
    assert clean_code == 0, clean_out
    assert "twicerun README tables" in clean_out and "Passed" in clean_out
    assert edited_code == 1 and "twicerun:steps-p is stale" in edited_out, edited_out
    assert orphaned_code == 1 and "no artifact renders steps-q" in orphaned_out, orphaned_out
    assert regenerated_code == 0, regenerated_out
    assert own_code == 0 and "Passed" in own_out, own_out


def test_the_projects_own_config_runs_the_check_on_its_readme(hook_repo, env):
    # .pre-commit-config.yaml runs the hook as `language: system` from .venv (so it checks
    # with the code being committed); no install, so this costs a second.
    (hook_repo / ".venv").symlink_to(REPO / ".venv", target_is_directory=True)
    own = run(
        [sys.executable, "-m", "pre_commit", "run", "twicerun-readme", "--all-files"],
        hook_repo,
        env=env,
        check=False,
    )
    assert own.returncode == 0, own.stdout + own.stderr
    assert "twicerun README tables" in own.stdout and "Passed" in own.stdout

    readme = hook_repo / "README.md"
    committed = readme.read_text()
    readme.write_text(committed.replace("| 4 of 4 |", "| 3 of 4 |", 1))
    edited = run(
        [sys.executable, "-m", "pre_commit", "run", "twicerun-readme", "--all-files"],
        hook_repo,
        env=env,
        check=False,
    )
    readme.write_text(committed)
    assert edited.returncode == 1 and "is stale" in edited.stdout


def test_a_consumer_points_the_hook_at_another_file_through_args(hook_repo, env, tmp_path):
    consumer = tmp_path / "elsewhere"
    (consumer / "results").mkdir(parents=True)
    (consumer / "docs").mkdir()
    result = a_result()
    (consumer / "results" / "result.json").write_text(result.to_json())
    figures = consumer / "docs" / "figures.md"
    figures.write_text("# Figures\n\n<!-- twicerun:steps-p -->\n<!-- /twicerun:steps-p -->\n")
    assert twicerun_cli("report", "--update", "docs/figures.md", cwd=consumer).returncode == 0
    rev = run([*GIT, "rev-parse", "HEAD"], hook_repo).stdout.strip()
    (consumer / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: {rev}\n    hooks:\n"
        "      - id: twicerun-readme\n        args: [docs/figures.md]\n"
        "        files: ^(docs/figures\\.md|results/.*\\.json)$\n"
    )
    run([*GIT, "init", "-q"], consumer)
    run([*GIT, "add", "-A"], consumer)
    run([*GIT, "commit", "-q", "-m", "figures"], consumer)
    hook = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    passed = run(hook, consumer, env, check=False)
    assert passed.returncode == 0 and "Passed" in passed.stdout, passed.stdout
    figures.write_text(figures.read_text().replace("| 0 of 2 |", "| 2 of 2 |"))
    failed = run(hook, consumer, env, check=False)
    assert failed.returncode == 1 and "twicerun:steps-p is stale" in failed.stdout, failed.stdout


def test_report_check_imports_neither_duckdb_nor_pyarrow():
    # What the hook runs compares Markdown; installing and importing the engine is
    # the rest of the tool's business.
    probe = (
        "import sys\n"
        "from twicerun.cli import main\n"
        "main(['report', '--check', 'README.md'])\n"
        "print(sorted(m for m in ('duckdb', 'pyarrow') if m in sys.modules))\n"
    )
    done = run([sys.executable, "-c", probe], REPO)
    assert done.stdout.strip().splitlines()[-1] == "[]"
