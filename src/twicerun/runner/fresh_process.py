"""A second Python process, with a string hash seed of its own, to execute steps in.

Every execution in one twicerun process shares its interpreter, and with it the seed
Python hashes strings by, which fixes the order a set of strings iterates in. A step
that builds its SELECT list, or its rows, by iterating over such a set repeats itself
in one process and not in tomorrow's. `audit` therefore runs each step's second
execution here: the pipeline imported afresh, under another `PYTHONHASHSEED`, on the
same input files, so "would I get the same answer if I ran it again" is asked of a new
process, as a scheduler would run it.

The two processes talk over a pair of pipes of their own, one JSON object per line,
since a step may print anything to stdout or stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from twicerun.errors import StepCrashed, StepTimedOut, TwicerunError
from twicerun.storage.context import ArtifactRef


def other_hash_seed(current: str | None) -> str:
    """A hash seed other than this process's: `current` is PYTHONHASHSEED as this process
    was started with it (unset or "random" means a random one, which a random choice from
    four billion differs from all but never)."""
    draw = random.SystemRandom()
    while True:
        seed = str(draw.randint(1, 2**32 - 1))
        if seed != current:
            return seed


# The other process's whole program: its exit status is serve's.
_ENTRY = (
    "import json, sys; from twicerun.runner.fresh_process import serve; "
    "sys.exit(serve(int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])))"
)


class FreshProcess:
    """The parent's side: started at once (it imports while the caller works), asked to
    execute one step at a time, closed (and killed if need be) on exit."""

    def __init__(
        self,
        pipeline: Path,
        seeds: Mapping[str, int],
        threads: int,
        under: Path,
        timeout: float | None = None,
    ):
        """`under` is where its scratch directory goes: the caller's own, which the caller
        removes however this process ended."""
        self.hash_seed = other_hash_seed(os.environ.get("PYTHONHASHSEED"))
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        config = {
            "pipeline": str(pipeline),
            "seeds": dict(seeds),
            "threads": threads,
            "under": str(under),
            "timeout": timeout,
        }
        try:
            self._child = subprocess.Popen(
                [
                    sys.executable,
                    # -P: `-c` would put the working directory first on the path, and a
                    # `types.py` or `random.py` there would stand in for the standard one.
                    # The pipeline's own directory is put there while it is imported.
                    "-P",
                    "-c",
                    _ENTRY,
                    str(requests_read),
                    str(replies_write),
                    json.dumps(config),
                ],
                env={**os.environ, "PYTHONHASHSEED": self.hash_seed},
                pass_fds=(requests_read, replies_write),
                stdin=subprocess.DEVNULL,
                # Ctrl-C reaches the parent, which stops this process itself: a traceback
                # from a second process under the report would only confuse it.
                start_new_session=True,
            )
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self._requests: IO[str] = os.fdopen(requests_write, "w")
        self._replies: IO[str] = os.fdopen(replies_read, "r")
        self._ready = False

    def _reply(self) -> dict[str, Any]:
        line = self._replies.readline()
        if not line:
            code = self._child.wait()
            raise TwicerunError(
                f"the second Python process the audit runs steps in stopped (exit {code}); "
                "its error, if it printed one, is above"
            )
        return json.loads(line)

    def execute(
        self, index: int, name: str, run: int, inputs: Mapping[str, ArtifactRef]
    ) -> dict[str, Any]:
        """Step `index` once in the other process, on `inputs`: its seconds, digests by
        artifact, what it read through ctx.state and the generators it left. A step that
        raises there raises StepCrashed here, as it would have in this process."""
        if not self._ready:
            hello = self._reply()
            if "failed" in hello:
                raise TwicerunError(f"the second Python process could not start: {hello['failed']}")
            self._ready = True
        request = {
            "index": index,
            "inputs": {n: {**ref.__dict__, "path": str(ref.path)} for n, ref in inputs.items()},
        }
        self._requests.write(json.dumps(request) + "\n")
        self._requests.flush()
        reply = self._reply()
        if "crashed" in reply:
            c = reply["crashed"]
            # The exception itself stayed in the other process: its type's name and its
            # message are what the report prints of it.
            error = (
                StepTimedOut(c["seconds"])
                if c.get("seconds") is not None
                else type(c["type"], (Exception,), {})(c["message"])
            )
            raise StepCrashed(
                index=index, name=name, run=run, error=error, where=c["where"], hint=c["hint"]
            )
        return reply["run"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self._child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        finally:
            self._replies.close()

    def kill(self) -> None:
        self._child.kill()
        self.close()


def _send(replies: IO[str], message: dict[str, Any]) -> None:
    replies.write(json.dumps(message) + "\n")
    replies.flush()


def serve(requests_fd: int, replies_fd: int, config: dict[str, Any]) -> int:
    """The other process's side: import the pipeline, then execute what is asked."""
    # Imported here: the parent imports this module only to start this process.
    from twicerun.pipeline import spawned
    from twicerun.pipeline.loader import load_pipeline
    from twicerun.runner.replay import AUDIT, Scratch, audit_run
    from twicerun.runner.step_output import imports_print_to_stderr
    from twicerun.storage.layout import RunAddress

    threads = int(config["threads"])
    # The parent kills this process when it is interrupted, which runs no clean-up here:
    # inside the parent's scratch directory, what this process made goes with it.
    spawned.place_under(Path(config["under"]))
    with (
        spawned.removed_at_end(),
        os.fdopen(requests_fd, "r") as requests,
        os.fdopen(replies_fd, "w") as replies,
    ):
        try:
            with imports_print_to_stderr():
                pipeline = load_pipeline(config["pipeline"], config["seeds"])
        except Exception as exc:  # the parent imported the same file: say why this one did not
            _send(replies, {"failed": f"{type(exc).__name__}: {exc}"})
            return 1
        steps = {s.index: s for s in pipeline.steps}
        with Scratch(
            threads, AUDIT, pipeline.engine, under=Path(config["under"]), timeout=config["timeout"]
        ) as scratch:
            _send(replies, {"ready": True})
            # The last step's copies, kept until the parent, having compared them with its
            # own, asks for the next step.
            held = None
            for line in requests:
                if held is not None:
                    scratch.forget(*held)
                    held = None
                request = json.loads(line)
                step = steps[int(request["index"])]
                inputs = {
                    n: ArtifactRef(**{**v, "path": Path(v["path"])})
                    for n, v in request["inputs"].items()
                }
                address = RunAddress(AUDIT, 2)
                scratch.connections.expect(threads, 1)
                try:
                    receipt = scratch.execute(step, address, threads, inputs)
                except StepCrashed as exc:
                    crashed = {
                        "type": type(exc.error).__name__,
                        "message": exc.shown,
                        "where": exc.where,
                        "hint": exc.hint,
                        # Sent so that the parent says it was stopped, not that it raised.
                        "seconds": (
                            exc.error.seconds if isinstance(exc.error, StepTimedOut) else None
                        ),
                    }
                    _send(replies, {"crashed": crashed})
                    continue
                held = (address, step)
                _send(replies, {"run": asdict(audit_run(receipt, 0.0, scratch.path))})
    return 0
