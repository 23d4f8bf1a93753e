"""`twicerun comment` and `twicerun post`: the sticky comment posted after the check,
for pull requests from forks, whose own run cannot write one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from twicerun.cli.app import (
    cli,
    epilog,
)
from twicerun.errors import (
    UsageError,
)
from twicerun.github.comment import find_pull_request, post_sticky
from twicerun.github.gate import Gate
from twicerun.github.summary import comment_body
from twicerun.github.workflow import Workflow
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.vocabulary.exits import PostExit


@cli.command("comment", epilog=epilog(PostExit))
@click.argument("body_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--number", type=click.IntRange(min=1), required=True, help="The pull request.")
@click.option("--repository", envvar="GITHUB_REPOSITORY", required=True, help="OWNER/REPO.")
def comment_command(body_file: Path, number: int, repository: str) -> int:
    """Post a comment body that `twicerun gate` wrote to a file, as the sticky comment.

    For a pull request from a fork, whose token cannot write: a `workflow_run`
    workflow with a token that can downloads the file and runs this, from the
    default branch's checkout, never the pull request's code (docs/action.md).
    """
    body = body_file.read_text(encoding="utf-8")
    if not body.startswith("<!-- twicerun:comment:"):
        raise UsageError(
            f"{body_file} is not a comment twicerun gate wrote (no marker on its first line)"
        )
    workflow = Workflow.from_environ(os.environ)
    posted = post_sticky(
        api_url=workflow.api_url,
        token=os.environ.get("GITHUB_TOKEN", ""),
        repository=repository,
        number=number,
        body=body,
        fallback=body_file.with_name(body_file.name + ".unposted"),
        save=write_bytes_atomic,
    )
    if posted.action == "written-to-file":
        click.echo(f"twicerun: GitHub refused the comment ({posted.reason})", err=True)
        return PostExit.FAILED
    click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    return PostExit.DONE


@cli.command("post", epilog=epilog(PostExit))
@click.argument("document", type=click.Path(exists=True, path_type=Path))
@click.option("--repository", envvar="GITHUB_REPOSITORY", required=True, help="OWNER/REPO.")
@click.option(
    "--comment-id",
    envvar="TWICERUN_COMMENT_ID",
    default=None,
    help="The sticky comment's identity, as the gate that wrote the document used it.",
)
def post(document: Path, repository: str, comment_id: str | None) -> int:
    """Post the comment of a gate DOCUMENT that a pull request's run left as an artifact
    (the file, or the directory the artifact was downloaded into).

    For pull requests from forks, whose own run has a read-only token: a
    `workflow_run` workflow (the action's `mode: post`) downloads the document and
    runs this. The pull request is looked up from the workflow run's head, never
    taken from the artifact; a document naming another pull request or another head
    is refused; the body is rendered here from the document's data. Nothing from
    the pull request is checked out or run.
    """
    if document.is_dir():
        found = sorted(document.glob("twicerun-*-result.json"))
        if len(found) != 1:
            raise UsageError(
                f"{document} holds {len(found)} gate documents (twicerun-*-result.json); "
                f"name the one to post"
            )
        document = found[0]
    workflow = Workflow.from_environ(os.environ)
    run = workflow.workflow_run
    try:
        gate = Gate.from_document(json.loads(document.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UsageError(
            f"{document} is not a twicerun gate document ({exc}); posting nothing"
        ) from exc
    claimed = gate.pull_request or {}
    api_url = workflow.api_url
    token = os.environ.get("GITHUB_TOKEN", "")
    head_repository = (run.get("head_repository") or {}).get("full_name") or repository
    number = find_pull_request(
        api_url=api_url,
        token=token,
        repository=repository,
        head_repository=head_repository,
        head_branch=str(run.get("head_branch") or ""),
        head_sha=str(run["head_sha"]),
    )
    if number is None:
        raise UsageError(
            f"no open pull request into {repository} has the head {run['head_sha']}; posting nothing"
        )
    if claimed.get("number") != number or claimed.get("head_sha") != run["head_sha"]:
        raise UsageError(
            f"the document names pull request #{claimed.get('number')} at "
            f"{claimed.get('head_sha')}, but the run that made it was for #{number} at "
            f"{run['head_sha']}; posting nothing"
        )
    run_url = run.get("html_url")
    posted = post_sticky(
        api_url=api_url,
        token=token,
        repository=repository,
        number=number,
        body=comment_body(gate, "", run_url, comment_id=comment_id),
        fallback=document.with_name(document.name + ".unposted.md"),
        save=write_bytes_atomic,
    )
    if posted.action in ("written-to-file", "failed"):
        click.echo(f"twicerun: GitHub refused the comment ({posted.reason})", err=True)
        return PostExit.FAILED
    click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    return PostExit.DONE
