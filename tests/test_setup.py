"""The set-up promises: the README's two lines, .ci/run, and the entry points."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_the_readme_has_one_line_that_runs_the_reference_and_one_that_runs_the_tests():
    commands = readme_commands()
    runs = [c for c in commands if c.endswith("twicerun run pipelines/reference.py")]
    tests = [c for c in commands if c.endswith("-m pytest")]
    assert len(runs) == 1 and len(tests) == 1
    assert "requirements.lock" in runs[0] and "requirements.lock" in tests[0]


def test_ci_runs_the_readmes_test_line_verbatim():
    test_line = next(c for c in readme_commands() if c.endswith("-m pytest"))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_line in ci
    assert any(line.startswith(".venv/bin/ruff check") for line in ci)


def test_the_lock_pins_every_declared_dependency_exactly():
    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    for name in (
        "duckdb",
        "pyarrow",
        "click",
        "pytest",
        "pytest-socket",
        "pytest-xdist",
        "hypothesis",
        "ruff",
    ):
        assert pins.get(name), f"{name} is not pinned in requirements.lock"
    # The build backend too: the hook test installs twicerun from .venv/wheelhouse, offline.
    assert pins.get("flit-core"), "flit_core, the build backend, is not pinned in requirements.lock"


def test_ci_runs_the_suite_on_every_lower_bound_pyproject_admits():
    """A range in pyproject.toml is a promise only where the suite has run."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    bounds = {}
    for spec in [*project["dependencies"], *project["optional-dependencies"]["spark"]]:
        name, lowest = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)", spec).groups()
        bounds[name.lower()] = tuple(int(part) for part in lowest.split("."))
    workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    (line,) = [ln for ln in workflow.splitlines() if "pip install -q duckdb==" in ln]
    pinned = {
        name.lower(): tuple(int(part) for part in version.split("."))
        for name, version in re.findall(r"([A-Za-z0-9_.-]+)==([0-9.]+)", line)
    }
    assert set(pinned) == set(bounds)
    for name, lowest in bounds.items():
        assert pinned[name] == lowest + (0,) * (len(pinned[name]) - len(lowest)), name


def test_the_built_version_is_the_one_the_package_reports():
    # flit reads the static version from pyproject.toml; the package reads _version.py.
    import tomllib

    from twicerun import __version__

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == __version__


def test_python_dash_m_twicerun_is_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert done.stdout.startswith("twicerun, version ")


def test_run_help_teaches_the_flags_and_the_exit_codes(twicerun):
    outcome = twicerun("run", "--help", with_run_dir=False)
    assert outcome.code == 0
    for flag in (
        "--runs",
        "--threads",
        "--no-containment",
        "--run-dir",
        "--keep",
        "--json",
        "--seed",
    ):
        assert flag in outcome.out
    assert "Exit codes:" in outcome.out
    assert "130  interrupted" in outcome.out


def test_the_suite_starts_at_most_four_workers_however_many_cores():
    # Each worker runs full-size pipelines and may start a JVM: one per core on a large
    # workstation would take many gigabytes for no gain in a suite of a few dozen files.
    import tomllib

    pytest_options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    addopts = pytest_options["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert addopts[addopts.index("-n") + 1] == "auto"
    assert addopts[addopts.index("--maxprocesses") + 1] == "4"


def test_the_suite_passes_inside_a_pull_requests_workflow_and_writes_nothing_there(tmp_path):
    """ci.yml runs the suite on pull requests, where the runner sets the event, the base
    branch and the step's summary and output files for every process: three gate tests
    read them instead of their own, failed, and wrote into the job's summary."""
    event = tmp_path / "event.json"
    event.write_text(
        '{"number": 7, "pull_request": {"number": 7, "head": {"sha": "' + "1" * 40 + '", '
        '"repo": {"full_name": "o/r"}}, "base": {"ref": "main", "sha": "' + "2" * 40 + '"}}, '
        '"repository": {"full_name": "o/r"}}'
    )
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    summary.touch()
    output.touch()
    runner = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_BASE_REF": "main",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "RUNNER_TEMP": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n0", "-q",
         "tests/test_action.py::test_the_gate_writes_sarif_for_code_scanning"],
        cwd=REPO,
        env={**os.environ, **runner},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert summary.read_text() == "" and output.read_text() == ""
