"""Retention: prune only after success, never a live or failed invocation."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from twicerun.storage.layout import Invocation, invocations_with
from twicerun.storage.retention import prune

QUIET = "def a(ctx):\n    ctx.write('x', 'SELECT 1 AS v')\n"
BROKEN = "def a(ctx):\n    raise RuntimeError('no')\n"


def invocations(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if (p / "invocation.json").exists())


def outcome_of(run_dir: Path, name: str) -> str:
    return json.loads((run_dir / name / "invocation.json").read_text())["outcome"]


def test_the_default_keeps_only_the_newest_completed_invocation(write_pipeline, twicerun, run_dir):
    path = write_pipeline(QUIET)
    for _ in range(3):
        assert twicerun("run", path, "--runs", "2").code == 0
    left = invocations(run_dir)
    assert len(left) == 1
    assert outcome_of(run_dir, left[0]) == "completed"


def test_keep_counts_the_invocations_of_the_same_pipeline_only(write_pipeline, twicerun, run_dir):
    """--keep counted every invocation in the run directory together, so running a second
    pipeline removed the first one's run (the gate, which runs each pipeline in turn,
    left only the last one's), and `twicerun diff` of it said --keep had taken it."""
    first = write_pipeline(QUIET, "first.py")
    second = write_pipeline(QUIET, "second.py")
    assert twicerun("run", first, "--runs", "2").code == 0
    (kept,) = invocations(run_dir)
    for _ in range(2):
        assert twicerun("run", second, "--runs", "2").code == 0
    left = invocations(run_dir)
    assert kept in left and len(left) == 2
    assert twicerun("diff", str(run_dir / kept), f"{run_dir / kept}#2").code == 0
    assert twicerun("run", first, "--runs", "2").code == 0
    assert kept not in invocations(run_dir) and len(invocations(run_dir)) == 2


def test_the_newest_invocation_remembers_what_retention_removed_before_it(
    write_pipeline, twicerun, run_dir
):
    """So a verb given a removed invocation's name can say --keep took it, even after the
    invocation that removed it was removed in turn."""
    path = write_pipeline(QUIET)
    names = []
    for _ in range(3):
        assert twicerun("run", path, "--runs", "2").code == 0
        (newest,) = invocations(run_dir)
        names.append(newest)
    manifest = json.loads((run_dir / names[-1] / "invocation.json").read_text())
    assert manifest["removed"] == names[:2]
    # An invocation that removed nothing records nothing. (Names sort by the second they
    # started, then at random, so the new one is told apart by what was there before.)
    assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 0
    (kept,) = set(invocations(run_dir)) - {names[-1]}
    assert "removed" not in json.loads((run_dir / kept / "invocation.json").read_text())


def test_keep_n_keeps_n_and_keep_0_keeps_everything(write_pipeline, twicerun, run_dir):
    path = write_pipeline(QUIET)
    for _ in range(3):
        twicerun("run", path, "--runs", "2", "--keep", "2")
    assert len(invocations(run_dir)) == 2
    for _ in range(2):
        twicerun("run", path, "--runs", "2", "--keep", "0")
    assert len(invocations(run_dir)) == 4


def test_a_failed_invocation_is_never_pruned_and_does_not_prune(write_pipeline, twicerun, run_dir):
    quiet = write_pipeline(QUIET, name="quiet.py")
    broken = write_pipeline(BROKEN, name="broken.py")
    twicerun("run", quiet, "--runs", "2")
    first = invocations(run_dir)
    assert twicerun("run", broken, "--runs", "2").code == 3
    # The failure pruned nothing: the earlier completed run is still there.
    assert set(first) <= set(invocations(run_dir))
    failed = [n for n in invocations(run_dir) if outcome_of(run_dir, n) == "failed"]
    assert len(failed) == 1
    for _ in range(2):
        twicerun("run", quiet, "--runs", "2")
    left = invocations(run_dir)
    assert failed[0] in left
    assert [outcome_of(run_dir, n) for n in left].count("completed") == 1


def test_the_report_names_the_kept_failures(write_pipeline, twicerun, run_dir):
    """It gave a count, and finding which directories meant opening manifests."""
    broken = write_pipeline(BROKEN, name="broken.py")
    twicerun("run", broken, "--runs", "2")
    outcome = twicerun("run", write_pipeline(QUIET, name="quiet.py"), "--runs", "2")
    (failed,) = [n for n in invocations(run_dir) if outcome_of(run_dir, n) == "failed"]
    assert (
        "1 directory from a failed, interrupted or killed invocation is kept beside this one, "
        f"{run_dir.resolve() / failed}; remove it once read."
    ) in outcome.out.splitlines()
    for _ in range(3):
        twicerun("run", broken, "--runs", "2")
    outcome = twicerun("run", write_pipeline(QUIET, name="quiet.py"), "--runs", "2")
    # The newest three by when they started (names in one second sort by chance).
    failed = [inv.root.name for inv, _ in invocations_with(run_dir, "failed")]
    newest = [str(run_dir.resolve() / n) for n in failed[-3:]]
    assert (
        "4 directories from failed, interrupted or killed invocations are kept beside this one, "
        f"{newest[0]}, {newest[1]} and {newest[2]} (and 1 older); remove them once read."
    ) in outcome.out.splitlines()


def test_a_live_invocation_is_never_pruned(tmp_path):
    run_dir = tmp_path / "runs"
    live = Invocation.create(run_dir, {"pipeline": "p.py"})
    assert json.loads(live.manifest_path.read_text())["pid"] == os.getpid()
    done = []
    for _ in range(3):
        inv = Invocation.create(run_dir, {"pipeline": "p.py"})
        inv.finish("completed")
        done.append(inv)
    removed = prune(run_dir, 1, done[-1])
    assert sorted(removed) == sorted(i.root.name for i in done[:-1])
    assert live.root.exists()
    assert done[-1].root.exists()


def test_a_removal_cut_short_is_finished_by_the_next_prune(tmp_path, monkeypatch):
    """A removal stopped partway (Ctrl-C, a file it could not delete at that moment) left
    its `.removing-<name>` directory, with whatever it still held, for good: nothing ever
    looked at it again."""
    from twicerun.storage import retention

    run_dir = tmp_path / "runs"
    old = Invocation.create(run_dir, {"pipeline": "p.py"})
    (old.root / "loop" / "1").mkdir(parents=True)
    (old.root / "loop" / "1" / "big.parquet").write_bytes(b"x" * 1000)
    old.finish("completed")
    current = Invocation.create(run_dir, {"pipeline": "p.py"})
    current.finish("completed")

    def cut_short(path, *args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(retention.shutil, "rmtree", cut_short)
        with pytest.raises(KeyboardInterrupt):
            prune(run_dir, 1, current)
    left = run_dir / f".removing-{old.root.name}"
    assert (left / "loop" / "1" / "big.parquet").exists()
    # A directory of the user's that only looks alike is not twicerun's to remove.
    mine = run_dir / ".removing-my-notes"
    mine.mkdir()

    newer = Invocation.create(run_dir, {"pipeline": "p.py"})
    newer.finish("completed")
    # Only invocations count as removed; the leftover was one no longer.
    assert prune(run_dir, 1, newer) == [current.root.name]
    assert not left.exists()
    assert mine.exists()
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [".gitignore", ".removing-my-notes", newer.root.name]
    )


def test_an_unreadable_manifest_is_left_alone(tmp_path):
    run_dir = tmp_path / "runs"
    odd = run_dir / "20200101-000000-dead"
    odd.mkdir(parents=True)
    (odd / "invocation.json").write_text("{not json")
    current = Invocation.create(run_dir, {})
    current.finish("completed")
    assert prune(run_dir, 1, current) == []
    assert odd.exists()


def test_the_newest_invocation_is_the_one_that_started_last_not_the_last_name(
    write_pipeline, twicerun, run_dir
):
    from twicerun.runner.rescore import resolve_invocation

    path = write_pipeline(QUIET)
    for _ in range(2):
        assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 0
    first, second = sorted(p for p in run_dir.iterdir() if p.is_dir())
    # Same second, and the random suffix sorts the other way round.
    started = json.loads((second / "invocation.json").read_text())["started"]
    for directory, name, at in (
        (first, "20260101-000000-ffff", started - 0.5),
        (second, "20260101-000000-0000", started),
    ):
        manifest = json.loads((directory / "invocation.json").read_text())
        manifest["started"] = at
        (directory / "invocation.json").write_text(json.dumps(manifest))
        directory.rename(run_dir / name)
    assert resolve_invocation(run_dir).root.name == "20260101-000000-0000"


def test_a_corrupt_receipt_in_an_earlier_run_does_not_stop_a_later_run_with_a_key(
    write_pipeline, twicerun, run_dir
):
    path = write_pipeline("def a(ctx):\n    ctx.write('x', 'SELECT 1 AS k, 2 AS v')\n")
    assert twicerun("run", path, "--runs", "2").code == 0
    (receipt,) = run_dir.glob("*/loop/1/*/receipt.json")
    receipt.write_text("{ not json")
    outcome = twicerun("run", path, "--runs", "2", "--key", "x=k")
    assert outcome.code == 0, outcome.err


GITIGNORE = "# Invocation directories written by twicerun: not for version control.\n*\n"


def test_a_run_directory_twicerun_makes_keeps_itself_out_of_git(write_pipeline, twicerun, tmp_path):
    path = write_pipeline(QUIET)
    made = tmp_path / "new" / "runs"
    assert twicerun("run", path, "--runs", "2", "--run-dir", made).code == 0
    assert (made / ".gitignore").read_text() == GITIGNORE
    if shutil.which("git"):
        # A `git add -A` in the repository would stage none of it.
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        status = subprocess.run(
            ["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "new/runs" not in status and "pipeline.py" in status


def test_a_directory_the_user_named_is_not_written_into_but_the_default_one_is(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    path = write_pipeline(QUIET)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert twicerun("run", path, "--runs", "2", "--run-dir", mine).code == 0
    assert not (mine / ".gitignore").exists()
    # A .twicerun left by an earlier version is twicerun's own: it gets one.
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".twicerun").mkdir()
    assert twicerun("run", path, "--runs", "2", with_run_dir=False).code == 0
    assert (tmp_path / ".twicerun" / ".gitignore").read_text() == GITIGNORE


def test_a_pid_taken_by_a_newer_process_does_not_keep_a_killed_invocation_running(tmp_path):
    # Process and thread ids share one counter that wraps, so a killed invocation's pid
    # can belong to someone else by the time the next invocation looks. The pid here is
    # alive (this process) but was recorded with another start time: a different process.
    from twicerun.storage.processes import started
    from twicerun.storage.retention import reap

    run_dir = tmp_path / "runs"
    dead = Invocation.create(run_dir, {"pipeline": "p.py"})
    manifest = json.loads(dead.manifest_path.read_text())
    assert manifest["pid_started"] == started(os.getpid())
    dead.update_manifest(pid_started=manifest["pid_started"] - 1)
    current = Invocation.create(run_dir, {"pipeline": "p.py"})
    assert reap(run_dir, current) == [dead.root.name]
    assert outcome_of(run_dir, dead.root.name) == "killed"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are seen through /proc")
def test_an_invocation_whose_process_is_a_zombie_is_reaped(tmp_path):
    # A process killed but not yet collected by its parent still answers a signal-0
    # probe, with its own start time; where nothing collects it (a container whose
    # first process reaps no orphans) the invocation it ran stayed `running` for good.
    from twicerun.storage.processes import alive, started
    from twicerun.storage.retention import reap

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = started(child.pid)
        assert alive(child.pid, start)
        os.kill(child.pid, signal.SIGKILL)
        # Not waited for: a zombie until the finally below collects it.
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not alive(child.pid, start)

        run_dir = tmp_path / "runs"
        dead = Invocation.create(run_dir, {"pipeline": "p.py"})
        dead.update_manifest(pid=child.pid, pid_started=start)
        current = Invocation.create(run_dir, {"pipeline": "p.py"})
        assert reap(run_dir, current) == [dead.root.name]
        assert outcome_of(run_dir, dead.root.name) == "killed"
    finally:
        child.kill()
        child.wait()


def test_a_live_invocation_with_its_own_start_time_is_not_reaped(tmp_path):
    from twicerun.storage.retention import reap

    run_dir = tmp_path / "runs"
    live = Invocation.create(run_dir, {"pipeline": "p.py"})
    current = Invocation.create(run_dir, {"pipeline": "p.py"})
    assert reap(run_dir, current) == []
    assert outcome_of(run_dir, live.root.name) == "running"


def test_a_manifest_without_a_start_time_is_judged_by_its_pid_alone(tmp_path):
    # Manifests written before start times were recorded, and hosts without /proc.
    from twicerun.storage.retention import reap

    run_dir = tmp_path / "runs"
    older = Invocation.create(run_dir, {"pipeline": "p.py"})
    older.update_manifest(pid_started=None)
    current = Invocation.create(run_dir, {"pipeline": "p.py"})
    assert reap(run_dir, current) == []
    assert outcome_of(run_dir, older.root.name) == "running"


def test_on_windows_no_process_is_signalled_to_see_whether_it_lives(tmp_path, monkeypatch):
    """os.kill(pid, 0) is a probe on POSIX and, on Windows, ends the process: the reaper
    would have killed a live invocation beside it, or whatever had taken its pid."""
    import types

    from twicerun.storage import processes
    from twicerun.storage.retention import reap

    signalled = []
    monkeypatch.setattr(processes, "sys", types.SimpleNamespace(platform="win32"))
    monkeypatch.setattr(processes.os, "kill", lambda *a: signalled.append(a))
    run_dir = tmp_path / "runs"
    other = Invocation.create(run_dir, {"pipeline": "p.py"})
    other.update_manifest(pid=os.getpid())
    current = Invocation.create(run_dir, {"pipeline": "p.py"})
    assert reap(run_dir, current) == []
    assert signalled == []
    assert outcome_of(run_dir, other.root.name) == "running"
