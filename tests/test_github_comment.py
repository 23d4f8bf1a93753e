"""The sticky comment, through the real PyGithub client, against a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import pytest
from fakegithub import BOT, READ_ONLY_TOKEN, WORKFLOW_TOKEN, FakeGitHub

from twicerun.github.comment import marker, post_sticky
from twicerun.storage.atomic import write_bytes_atomic

PR = 7


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        yield fake


def post(github, body, tmp_path, token=WORKFLOW_TOKEN):
    return post_sticky(
        api_url=github.url,
        token=token,
        repository="octo/pipes",
        number=PR,
        body=body,
        fallback=tmp_path / "comment.md",
        save=write_bytes_atomic,
    )


def body(text: str) -> str:
    return f"{marker('pipelines/*.py')}\n### twicerun\n\n{text}\n"


def test_first_run_creates_second_edits_third_unchanged_makes_no_write(github, tmp_path):
    first = post(github, body("one"), tmp_path)
    assert first.action == "created"
    assert len(github.ours(PR)) == 1
    second = post(github, body("two"), tmp_path)
    assert second.action == "edited"
    assert [c["body"] for c in github.ours(PR)] == [body("two")]
    writes_before = len(github.writes())
    third = post(github, body("two"), tmp_path)
    assert third.action == "unchanged"
    assert len(github.writes()) == writes_before
    assert first.url == second.url == third.url


def test_a_marker_on_the_second_page_of_comments_is_found(github, tmp_path):
    for i in range(35):
        github.add_comment(PR, f"chatter {i}", "someone")
    ours = github.add_comment(PR, body("old"), BOT)
    github.add_comment(PR, "more chatter", "someone")
    outcome = post(github, body("new"), tmp_path)
    assert outcome.action == "edited"
    assert ours["body"] == body("new")
    assert len(github.ours(PR)) == 1
    assert ("GET", "/repos/octo/pipes/issues/7/comments") in github.requests


def test_a_comment_with_the_marker_by_someone_else_is_not_ours(github, tmp_path):
    github.add_comment(PR, body("quoted by a person"), "someone")
    assert post(github, body("mine"), tmp_path).action == "created"
    assert len(github.ours(PR)) == 1


def test_another_pipeline_set_gets_its_own_comment(github, tmp_path):
    post(github, body("set one"), tmp_path)
    other = f"{marker('other/*.py')}\n### twicerun\n\nset two\n"
    assert post(github, other, tmp_path).action == "created"
    assert len(github.ours(PR)) == 2


def test_a_token_that_cannot_write_falls_back_to_a_file(github, tmp_path):
    outcome = post(github, body("from a fork"), tmp_path, token=READ_ONLY_TOKEN)
    assert outcome.action == "written-to-file"
    assert outcome.reason == "403: Resource not accessible by integration"
    assert (tmp_path / "comment.md").read_text() == body("from a fork")
    assert github.ours(PR) == []


def test_the_comment_verb_posts_a_file_the_gate_wrote(github, tmp_path, twicerun, monkeypatch):
    path = tmp_path / "twicerun-comment.md"
    path.write_text(body("from a fork, posted later"))
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    monkeypatch.setenv("GITHUB_TOKEN", WORKFLOW_TOKEN)
    outcome = twicerun("comment", path, "--number", str(PR), "--repository", "octo/pipes")
    assert outcome.code == 0, outcome.err
    assert [c["body"] for c in github.ours(PR)] == [body("from a fork, posted later")]


def test_the_comment_verb_refuses_a_file_that_is_not_a_twicerun_comment(tmp_path, twicerun):
    path = tmp_path / "other.md"
    path.write_text("<!-- something else -->\nhello\n")
    outcome = twicerun("comment", path, "--number", "3", "--repository", "octo/pipes")
    assert outcome.code == 2
    assert outcome.err == (
        f"twicerun: {path} is not a comment twicerun gate wrote (no marker on its first line)\n"
    )


def test_two_bad_gateways_then_success_posts_the_comment(github, tmp_path):
    github.failures = [502, 502]
    posted = post(github, body("after a bad day"), tmp_path)
    assert posted.action == "created"
    assert [c["body"] for c in github.ours(PR)] == [body("after a bad day")]


def test_a_server_that_keeps_failing_is_a_failed_post_not_an_exception(github, tmp_path):
    github.always = 500
    posted = post(github, body("never"), tmp_path)
    assert posted.action == "failed"
    assert "500" in posted.reason
    assert not (tmp_path / "comment.md").exists()


def test_an_app_token_edits_its_own_comment_instead_of_adding_one_per_push(github, tmp_path):
    from fakegithub import APP_BOT, APP_TOKEN

    github.add_comment(PR, body("a person quoting the marker"), "contributor")
    assert post(github, body("first"), tmp_path, token=APP_TOKEN).action == "created"
    assert post(github, body("second"), tmp_path, token=APP_TOKEN).action == "edited"
    assert post(github, body("second"), tmp_path, token=APP_TOKEN).action == "unchanged"
    ours = [c for c in github.comments if c["user"]["login"] == APP_BOT]
    assert [c["body"] for c in ours] == [body("second")]
    # The person's comment with the marker was never ours to edit.
    assert [c["body"] for c in github.comments if c["user"]["login"] == "contributor"] == [
        body("a person quoting the marker")
    ]
