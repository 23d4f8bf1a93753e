"""What a finished gate owes the job, in the order that keeps the most of it on a bad day.

The document and the SARIF file, then the job summary and the step outputs, then
the comment, then the annotations (the check's own first, where the cap of ten
cannot drop them). GitHub's API failing costs the comment and nothing else. The
workflow-command lines are returned for the CLI to print; nothing here prints.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from twicerun.github.commands import Annotation, append_summary, commands, write_outputs
from twicerun.github.comment import post_sticky
from twicerun.github.gate import Gate
from twicerun.github.sarif import sarif_json
from twicerun.github.summary import comment_body, comment_identity, summary
from twicerun.github.workflow import Workflow

NOT_POSTED = "twicerun: comment not posted"


@dataclass(frozen=True)
class Delivered:
    """What became of each thing the gate owed, and the lines for the runner to read."""

    document: Path
    lines: list[str] = field(default_factory=list)
    comment_url: str = ""


def stem(gate: Gate, comment_id: str | None) -> str:
    """File names for this check's comment identity: two invocations in one job (two
    pipeline sets, a matrix on one runner) never overwrite each other's files."""
    identity = comment_identity(gate, comment_id)
    return "twicerun-" + hashlib.sha256(identity.encode("utf-8")).hexdigest()[:12]


def deliver(
    gate: Gate,
    workflow: Workflow,
    *,
    pipelines: str,
    token: str,
    comment: bool,
    comment_id: str | None,
    document: Path | None = None,
    sarif_path: Path | None = None,
    save: Callable[[Path, bytes], None],
    exit_code: int | None = None,
) -> Delivered:
    """`save` writes a file atomically; the storage room's, handed in by the CLI, since
    this room does not reach into storage. `exit_code`, the CLI's for this decision, is
    set as an output, so the action can tell a process that ended as decided from one
    that ended otherwise."""
    name = stem(gate, comment_id)
    document = document or workflow.runner_temp / f"{name}-result.json"
    save(document, gate.json().encode("utf-8"))
    # Annotation paths are the repository's; the pipelines' are the working directory's.
    where = workflow.working_directory
    if sarif_path:
        save(sarif_path, sarif_json(gate, where).encode("utf-8"))
    annotations = [
        replace(a, file=posixpath.normpath(posixpath.join(where, a.file))) if a.file else a
        for a in gate.annotations
    ]
    if workflow.summary_path:
        append_summary(workflow.summary_path, summary(gate, pipelines))
    if workflow.output_path:
        write_outputs(
            workflow.output_path,
            {
                "result": str(document),
                "diverged": str(gate.diverged),
                "regressions": str(len(gate.regressions)),
                "comment-url": "",
                **({"exit-code": str(exit_code)} if exit_code is not None else {}),
            },
        )
    lines: list[str] = []
    late: list[Annotation] = []
    url = ""
    number = workflow.number
    if comment and number is not None and workflow.repository:
        fallback = workflow.runner_temp / f"{name}-comment.md"
        posted = post_sticky(
            api_url=workflow.api_url,
            token=token,
            repository=workflow.repository,
            number=number,
            body=comment_body(gate, pipelines, workflow.run_url, comment_id=comment_id),
            fallback=fallback,
            save=save,
        )
        if posted.action == "written-to-file":
            where_to = {"number": number, "repository": workflow.repository}
            save(fallback.with_suffix(".json"), (json.dumps(where_to) + "\n").encode("utf-8"))
            late.append(
                Annotation(
                    "warning",
                    f"This token cannot write to the pull request ({posted.reason}), as on a "
                    f"pull request from a fork. The comment is in {posted.path}; upload it as an "
                    f"artifact and post it from a workflow_run workflow (docs/action.md, fork "
                    f"pull requests).",
                    NOT_POSTED,
                )
            )
        elif posted.action == "failed":
            late.append(
                Annotation(
                    "warning",
                    f"The comment could not be posted ({posted.reason}); the check's result "
                    f"does not depend on it.",
                    NOT_POSTED,
                )
            )
            run = f" ({workflow.run_url})" if workflow.run_url else ""
            lines.append(f"::notice title=twicerun::The job summary{run} has the full report.")
        else:
            lines.append(f"twicerun: comment {posted.action}: {posted.url}")
            url = posted.url or ""
            if workflow.output_path and url:
                write_outputs(workflow.output_path, {"comment-url": url})
    elif comment and number is None:
        lines.append("twicerun: not a pull request event, so no comment")
    elif comment:
        late.append(
            Annotation(
                "warning",
                "GITHUB_REPOSITORY is empty, so the comment was not posted; the job summary has it",
                NOT_POSTED,
            )
        )
    # After the comment, so that what became of it is known; the annotations about the
    # check itself lead their severity, where the cap of ten cannot drop them.
    meta = [a for a in annotations if not a.file]
    lines += commands([*meta, *late, *(a for a in annotations if a.file)])
    return Delivered(document=document, lines=lines, comment_url=url)
