"""What a GitHub Actions runner hands a step, read once from its environment, as data.

The CLI builds a `Workflow` from `os.environ` and hands it on; nothing else in
twicerun reads the runner's variables or its event file. Bad values (a summary
path that is a directory, an event file that is not JSON) are refused here,
before any pipeline runs, with one sentence naming the variable.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twicerun.errors import UsageError
from twicerun.vocabulary import gate as words

API_URL = "https://api.github.com"
SERVER_URL = "https://github.com"


@dataclass(frozen=True)
class Workflow:
    api_url: str = API_URL
    server_url: str = SERVER_URL
    repository: str = ""
    run_id: str = ""
    event_name: str = ""
    # The pull request's base branch; GitHub sets it on pull_request events only.
    base_ref: str = ""
    event_path: str = ""
    event: dict[str, Any] = field(default_factory=dict)
    summary_path: Path | None = None
    output_path: Path | None = None
    runner_temp: Path = Path(".")
    # Where the action ran the pipelines from, relative to the repository root.
    working_directory: str = "."

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> Workflow:
        """Read and check the runner's variables; refuse what cannot be used."""
        files = {}
        for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
            value = env.get(name)
            if not value:
                files[name] = None
                continue
            path = Path(value)
            if path.is_dir():
                raise UsageError(f"{name}={value} is a directory; it must name a file to append to")
            if not path.parent.is_dir():
                raise UsageError(f"{name}={value}: {path.parent} is not a directory")
            files[name] = path
        event_path = env.get("GITHUB_EVENT_PATH") or ""
        event = read_event(event_path) if event_path and Path(event_path).is_file() else {}
        if event_path and not Path(event_path).is_file():
            read_event(event_path)  # names the variable and the reason
        return cls(
            api_url=env.get("GITHUB_API_URL") or API_URL,
            server_url=env.get("GITHUB_SERVER_URL") or SERVER_URL,
            repository=env.get("GITHUB_REPOSITORY", ""),
            run_id=env.get("GITHUB_RUN_ID", ""),
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            base_ref=env.get("GITHUB_BASE_REF", "").strip(),
            event_path=event_path,
            event=event,
            summary_path=files["GITHUB_STEP_SUMMARY"],
            output_path=files["GITHUB_OUTPUT"],
            runner_temp=Path(env.get("RUNNER_TEMP") or "."),
            working_directory=env.get("TWICERUN_WORKING_DIRECTORY", ".").strip() or ".",
        )

    def refuse_fork_code_with_secrets(self) -> None:
        """Pipelines are the pull request's code: never run a fork's under pull_request_target,
        where the job holds a write token and the base repository's secrets."""
        if self.event_name != "pull_request_target":
            return
        pull = self.event.get("pull_request") or {}
        head = ((pull.get("head") or {}).get("repo") or {}).get("full_name")
        base = ((pull.get("base") or {}).get("repo") or {}).get("full_name")
        if head != base:
            raise UsageError(
                f"refusing to run pipelines from the fork {head} under pull_request_target, "
                f"where the workflow holds a write token and the base repository's secrets; "
                f"run the check on pull_request and post its comment from workflow_run "
                f"(docs/action.md, pull requests from forks)"
            )

    @property
    def baseline_ref(self) -> str | None:
        """Where the baseline a change is judged against lives, as the action fetched it.

        A pull request's base branch; in a merge queue, which has no base branch
        (GITHUB_BASE_REF is empty on merge_group), the commit the group is built on,
        so the group's own copy, which a queued pull request may have edited, is never
        the one it is judged by. None elsewhere: a push judges its own checkout's copy.
        """
        if self.base_ref:
            return f"origin/{self.base_ref}"
        if self.event_name == "merge_group":
            sha = (self.event.get("merge_group") or {}).get("base_sha")
            if not isinstance(sha, str) or not sha.strip():
                what = (
                    f"GITHUB_EVENT_PATH={self.event_path} is a merge_group event without a "
                    f"merge_group.base_sha"
                    if self.event_path
                    else "GITHUB_EVENT_NAME is merge_group, but GITHUB_EVENT_PATH names no event"
                )
                raise UsageError(
                    f"{what}, so the commit the group is built on, whose baseline judges it, "
                    f"is unknown; pass --baseline-ref"
                )
            return sha.strip()
        return None

    @property
    def changed_by(self) -> str:
        """What the code being checked is, as a reader would name it."""
        if self.base_ref or self.pull_request:
            return words.CHANGED_BY_PULL_REQUEST
        if self.event_name == "merge_group":
            return words.CHANGED_BY_MERGE_GROUP
        return words.CHANGED_BY_CHECKOUT

    @property
    def run_url(self) -> str | None:
        if not self.run_id:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def pull_request(self) -> dict[str, Any] | None:
        """The pull request this run is for, as the event says: its number and head."""
        pull = self.event.get("pull_request") or {}
        if not pull.get("number"):
            return None
        return {"number": int(pull["number"]), "head_sha": (pull.get("head") or {}).get("sha")}

    @property
    def number(self) -> int | None:
        """The pull request or issue to comment on; None when the event has neither."""
        event = self.event
        pull = event.get("pull_request") or {}
        number = (
            pull.get("number") or (event.get("issue") or {}).get("number") or event.get("number")
        )
        return int(number) if number else None

    @property
    def workflow_run(self) -> dict[str, Any]:
        """The run a `workflow_run` event is about; refused for any other event."""
        run = self.event.get("workflow_run")
        if not isinstance(run, dict) or not run.get("head_sha"):
            raise UsageError(
                "twicerun post runs in a workflow_run workflow: GITHUB_EVENT_PATH holds no "
                "workflow_run"
            )
        return run


def read_event(event_path: str) -> dict[str, Any]:
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            f"GITHUB_EVENT_PATH={event_path} is not a readable JSON event ({exc})"
        ) from exc
    if not isinstance(event, dict):
        raise UsageError(f"GITHUB_EVENT_PATH={event_path} is not a JSON object")
    return event


# The files through which a step talks to the runner: its outputs, its summary, the
# environment and PATH of the steps after it, and its own saved state.
RUNNER_FILES = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE")


@contextlib.contextmanager
def runner_files_hidden(env: MutableMapping[str, str]) -> Iterator[None]:
    """While the block runs (the pipelines: the pull request's code), the runner's files are
    not in `env`, and are put back after, for the gate to deliver through. A pipeline that
    appended `result=pass` or `exit-code=0` to GITHUB_OUTPUT itself wrote the very outputs
    the action's guard reads; one that wrote GITHUB_ENV set variables for the steps after."""
    hidden = {name: env.pop(name) for name in RUNNER_FILES if name in env}
    try:
        yield
    finally:
        env.update(hidden)


def take_token(env: MutableMapping[str, str], token_file: str | None) -> str:
    """The token for posting, removed from the environment pipelines will run in.

    The action hands it over in a file (so it is not even in /proc/self/environ),
    read and deleted here; GITHUB_TOKEN, if set, is popped either way.
    """
    token = env.pop("GITHUB_TOKEN", "")
    if token_file:
        path = Path(token_file)
        try:
            token = path.read_text(encoding="utf-8").strip() or token
        except OSError as exc:
            raise UsageError(f"--token-file {token_file} cannot be read ({exc.strerror})") from exc
        finally:
            path.unlink(missing_ok=True)
    return token
