"""The sticky pull-request comment: one per pipeline set, found again and edited in place.

The comment carries a hidden marker naming the pipeline set. On every run the
comments of the pull request are read, every page of them, and the one with the
marker written by the same account is edited, or left alone when its body would
not change; only when there is none is a comment created. A token that cannot
write (a pull request from a fork) gets the body written to a file instead, for
a `workflow_run` workflow to post.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from twicerun.display import some
from twicerun.render.evidence import plural
from twicerun.render.markdown import bare, code, sentence, table
from twicerun.vocabulary import gate as words

if TYPE_CHECKING:
    from twicerun.github.gate import StepDecision

LIMIT = 65_536
RETRIES = 3
# Seconds: urllib3 sleeps BACKOFF * 2 ** (retry - 1) between tries (0, 1, 2 s at 0.5).
BACKOFF = 0.5
# Seconds PyGithub leaves between requests, and between writes: its defaults, which
# keep a check clear of GitHub's secondary rate limits. Named so the tests against the
# fake server on 127.0.0.1 can set them to 0.
BETWEEN_REQUESTS = 0.25
BETWEEN_WRITES = 1.0
BUDGET = 60_000  # well under GitHub's limit, leaving room for the tail
ERROR_SHOWN = 300  # characters of a step's error in the comment's list


def marker(pipelines: str) -> str:
    digest = hashlib.sha256(pipelines.encode("utf-8")).hexdigest()[:12]
    return f"<!-- twicerun:comment:{digest} -->"


def _rate(fired: int | None, compared: int | None) -> str:
    return "n/a" if fired is None or compared is None else f"{fired} of {compared}"


def _p(p: float | None) -> str:
    return "" if p is None else (f"{p:.2g}" if p >= 0.001 else "< 0.001")


def _p_phrase(p: float) -> str:
    """`p = 0.012`, or `p < 0.001` (not "p = < 0.001")."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _baseline(d: StepDecision) -> str:
    if d.baseline_trials is None:
        return "n/a"
    fired = (
        ""
        if d.baseline_differed_trials is None
        else f"differed in {d.baseline_differed_trials} of "
    )
    return f"{fired}{d.baseline_trials} trials"


def _now(d: StepDecision) -> str:
    now = _rate(d.now_fired, d.now_compared)
    if d.confirm_fired:
        now += f", then {', '.join(str(k) for k in d.confirm_fired)} on re-runs"
    if d.stress_only():
        now += f"; {d.stress_only()}"
    return now


def _line(d: StepDecision) -> str:
    where = f"{code(d.name)} in {code(d.pipeline)}"
    if d.verdict == words.STEP_RENAMED:
        return f"{where}: {d.verdict} (was {code(d.renamed_from)})"
    if d.verdict == words.DID_NOT_FINISH:
        # The error's first line: the rest (DuckDB's caret under the query) is in the
        # annotation and the job log, and would break the list here.
        first = d.evidence[0].splitlines()[0] if d.evidence else ""
        first = first if len(first) <= ERROR_SHOWN else first[: ERROR_SHOWN - 1] + "…"
        return f"{where}: {d.verdict}" + (f" ({bare(first)})" if first else "")
    if d.verdict in words.NOT_COMPARABLE:
        reason = _reason(d.verdict, d.evidence[0] if d.evidence else "")
        differed = _differed_now(d)
        return (
            f"{where}: {d.verdict}"
            + (f" ({bare(reason)})" if reason else "")
            + (f"; it differed {differed}" if differed else "")
        )
    p = "" if d.p_value is None else f", {_p_phrase(d.p_value)}"
    if d.verdict in words.OF_A_KIND and d.evidence:
        # Its fire counts are no news (it differed on the baseline too); the kind is.
        return f"{where}: {d.verdict}: {bare(d.evidence[0])}{p}"
    now = _rate(d.now_fired, d.now_compared) + " now"
    if d.confirm_fired:
        now += f", then {', '.join(str(k) for k in d.confirm_fired)} on re-runs"
    if d.stress_only():
        now += f"; {d.stress_only()}"
    if d.verdict in (words.RATE_UP, words.RATE_DOWN, words.NOT_CONFIRMED) and d.evidence:
        now += f"; {bare(d.evidence[0])}"  # what moved, where the comparisons did not
    return f"{where}: {d.verdict}, {_baseline(d)} on the baseline, {now}{p}"


# Not comparable because of a name the baseline lacks, with the step run now: what the
# run saw it do is all there is to judge it by.
_RAN_NOW = (words.STEP_ADDED, words.STEP_RENAMED, words.PIPELINE_ADDED)


def _differed_now(d: StepDecision) -> str:
    """How a step the baseline has no trials of differed in this run, or "" when it did
    not: "in 4 of 4 comparisons now (DIVERGENT)". Only the table used to say so, and the
    list's line read alike for a steady step and a random one, though the way out it
    offers (merge past the check, refresh the baseline) makes the random one normal."""
    if d.verdict not in _RAN_NOW:
        return ""
    status = f" ({d.status})" if d.status else ""
    if d.now_fired:
        return f"in {d.now_fired} of {d.now_compared} comparisons now{status}"
    if d.stress_only():
        return f"{d.stress_only()}{status}"
    return ""


# Not comparable because of a name the baseline lacks or the check did not run: an
# intended change, which only a new baseline resolves.
_NEW_NAMES = (
    words.STEP_ADDED,
    words.STEP_REMOVED,
    words.STEP_RENAMED,
    words.PIPELINE_ADDED,
    words.PIPELINE_MISSING,
)

# The parts of the instrument that measure; a platform or Python change is only named.
MEASURING = ("twicerun", "duckdb", "spark")


def render(
    decisions: list[StepDecision],
    *,
    pipelines: str,
    regressions: list[StepDecision],
    environment: list[str],
    stamp: str,
    note: str = "",
    baseline_error: str | None = None,
    baseline_moved: list[str] | None = None,
    baseline_source: str | None = None,
    changed_by: str = words.CHANGED_BY_PULL_REQUEST,
    confirmations: list[tuple[str, str]] | None = None,
    summary_url: str | None = None,
    budget: int = BUDGET,
    in_summary: bool = False,
) -> str:
    """The comment body, headline first; everything from a pipeline escaped.

    `in_summary`: rendered as the job summary, which is where a comment that had to
    be cut sends its reader; a summary that has to be cut sends them to the document.
    """
    cut_from = _Cut.for_summary() if in_summary else _Cut.for_comment(summary_url)
    failing, unfinished, failed = _partition(decisions, regressions)
    # A step the baseline cannot speak for fails the check (per fail-on) without having
    # got worse; calling it worse sent readers looking for a regression that is not there.
    uncompared = [d for d in failed if d.verdict in words.NOT_COMPARABLE]
    worse = [d for d in failed if d.verdict not in words.NOT_COMPARABLE]
    better = [d for d in decisions if d.verdict in words.BETTER]
    notable = [
        d
        for d in decisions
        if d.verdict in (*words.WORSE, *words.NOT_COMPARABLE, words.NOT_CONFIRMED)
        and (d.pipeline, d.name) not in failing
    ]
    parts = [marker(pipelines)]
    if baseline_moved:
        parts.append(
            f"> [!WARNING]\n> **This {changed_by} edits the baseline it is judged against.** "
            + (
                "The check used the base branch's copy. "
                if baseline_source == words.BASE_BRANCH
                else f"The check used this {changed_by}'s own copy. "
            )
            + "What moved: "
            + "; ".join(bare(m) for m in baseline_moved)
        )
    said = headlines(decisions, regressions, baseline_error)
    if unfinished:
        title = f"### twicerun: {said[0]}"
        parts.append(_bullets(title, [_line(d) for d in unfinished], budget // 4, cut_from))
        said = said[1:]
    if baseline_error:
        parts.append(f"### twicerun: {said[0]}\n\n{sentence(baseline_error)}")
    elif said:
        parts.append(f"### twicerun: {said[0]}")
    # The lists share half the budget, so that however many steps changed, the
    # whole body (not only the table) stays under GitHub's limit.
    lists = [
        (t, lines)
        for t, lines in (
            ("**Worse**", [_line(d) for d in worse]),
            ("**Not comparable with the baseline**", _uncompared_lines(uncompared)),
            ("**Better**", [_line(d) for d in better]),
            (
                "**Changed, not failing this check**",
                _uncompared_lines([d for d in notable if d.verdict in words.NOT_COMPARABLE])
                + [_line(d) for d in notable if d.verdict not in words.NOT_COMPARABLE],
            ),
        )
        if lines
    ]
    for title, lines in lists:
        parts.append(_bullets(title, lines, budget // 2 // len(lists), cut_from))
    if any(d.verdict in _NEW_NAMES for d in uncompared):
        # The verdict named the cause and left the reader to find the way out in the docs.
        parts.append(
            "A step or pipeline the baseline has no trials of under its name cannot be "
            "called unchanged. If the change is intended, merge it past this check "
            "(someone allowed to override it, or a `fail-on` without `not-comparable` on "
            "this pull request), then refresh the baseline on the base branch with "
            "`twicerun baseline update`."
            + (
                " A baseline refreshed with a step that differed here takes its differing "
                "as its normal, and the check stops flagging it."
                if any(_differed_now(d) for d in uncompared)
                else ""
            )
        )
    charted = [d for d in (*failed, *better, *notable) if d.baseline_fired_by_trial][:CHARTS]
    if charted:
        parts.append(
            "<details><summary>Each changed step, trial by trial</summary>\n\n"
            + "\n\n".join(_chart(d) for d in charted)
            + "\n\n</details>"
        )
    if confirmations:
        parts.append(
            "**Confirmation re-runs** (a suspect step is re-run before it can fail the check): "
            + "; ".join(f"{code(pipeline)}: {bare(what)}" for pipeline, what in confirmations)
        )
    if environment:
        parts.append(
            "**The instrument changed** (beside the verdicts, not one of them): "
            + "; ".join(bare(e) for e in environment)
        )
        measuring = [e.split(":", 1)[0] for e in environment]
        if any(key in MEASURING for key in measuring):
            # Named, but it left a reader to work out what to do about it.
            parts.append(
                "Another twicerun, DuckDB or Spark can change what a step computes or how it "
                "is stressed, so a verdict here may be the instrument's and not the "
                "pipeline's: once the upgrade lands, refresh the baseline on the base branch "
                "with `twicerun baseline update`."
            )
    rows = [
        [
            code(d.pipeline),
            code(d.name),
            bare(d.verdict),
            _baseline(d),
            _now(d),
            _p(d.p_value),
            bare(d.status or ""),
            bare(" ".join(d.classes)),
            bare(d.cause or ""),
        ]
        for d in decisions
    ]
    headers = ["pipeline", "step", "verdict", "baseline", "now", "p", "status", "classes", "cause"]
    # The note is twicerun's own sentence from its own figures, so its command stays code;
    # the stamp carries versions read from Results, which are escaped like pipeline text.
    tail = f"\n\n{' '.join(filter(None, [bare(stamp), note]))}"
    details = _details(
        f"Every step ({len(decisions)})",
        headers,
        rows,
        budget - sum(len(p) for p in parts) - len(tail),
        cut_from,
    )
    return "\n\n".join([*parts, details]) + tail + "\n"


CHARTS = 3


def _partition(
    decisions: list[StepDecision], regressions: list[StepDecision]
) -> tuple[set[tuple[str, str]], list[StepDecision], list[StepDecision]]:
    """The steps failing the check (by pipeline and name), the decisions of pipelines that
    did not finish, and the other decisions that fail the check."""
    # By step, not by value: comparing whole decisions made this quadratic in fields and
    # steps, seconds on a few hundred regressions.
    failing = {(d.pipeline, d.name) for d in regressions}
    unfinished = [d for d in decisions if d.verdict == words.DID_NOT_FINISH]
    failed = [
        d
        for d in decisions
        if (d.pipeline, d.name) in failing and d.verdict != words.DID_NOT_FINISH
    ]
    return failing, unfinished, failed


def headlines(
    decisions: list[StepDecision],
    regressions: list[StepDecision],
    baseline_error: str | None = None,
) -> list[str]:
    """What the check found, in the words of the comment's and the summary's headings
    (and of the gate's last line in the log): pipelines that did not finish first, then
    the baseline missing, or the steps that failed the check, or why it passes."""
    failing, unfinished, failed = _partition(decisions, regressions)
    said = []
    if unfinished:
        said.append(f"{plural(len({d.pipeline for d in unfinished}), 'pipeline')} did not finish")
    if baseline_error:
        said.append("no baseline to compare with")
    elif failed:
        uncompared = [d for d in failed if d.verdict in words.NOT_COMPARABLE]
        said.append("; ".join(_counted(len(failed) - len(uncompared), len(uncompared))))
    elif not unfinished:
        # A fail-on that leaves out a verdict lets such steps pass; the headline still counts
        # them, so a green check over a step that got worse, or over nothing compared, is
        # never silent.
        notable = [d for d in decisions if (d.pipeline, d.name) not in failing]
        let_worse = [d for d in notable if d.verdict in words.WORSE]
        let_uncompared = [d for d in notable if d.verdict in words.NOT_COMPARABLE]
        if let_uncompared and len(let_uncompared) == len(decisions):
            clauses = ["no step could be compared with the baseline"]
        else:
            clauses = _counted(len(let_worse), len(let_uncompared), "no step got worse")
        head = "; ".join(clauses)
        if let_worse or let_uncompared:
            head += ", which this check's fail-on lets pass"
        said.append(head)
    return said


def _counted(worse: int, uncompared: int, otherwise: str | None = None) -> list[str]:
    """The headline's clauses: how many steps got worse (or `otherwise`), then how many
    could not be compared with the baseline."""
    said = [f"{plural(worse, 'step')} got worse"] if worse else ([otherwise] if otherwise else [])
    if uncompared:
        said.append(
            f"{uncompared if worse else plural(uncompared, 'step')} could not be compared "
            f"with the baseline"
        )
    return said


def _uncompared_lines(decisions: list[StepDecision]) -> list[str]:
    """One line per step, except that the steps of one pipeline sharing one reason (a
    pipeline the baseline lacks, or measured with other settings) share one line: the
    reason is the pipeline's, and eight copies of it buried the one thing to fix."""
    groups: dict[tuple[str, str, str], list[StepDecision]] = {}
    for d in decisions:
        reason = d.evidence[0] if d.evidence else ""
        groups.setdefault((d.pipeline, d.verdict, reason), []).append(d)
    lines = []
    for (pipeline, verdict, reason), members in groups.items():
        if len(members) == 1 or verdict not in _PIPELINE_WIDE:
            lines += [_line(d) for d in members]
            continue
        said = _reason(verdict, reason)
        differed = [f"{code(d.name)} {how}" for d in members if (how := _differed_now(d))]
        lines.append(
            f"{code(pipeline)}, {plural(len(members), 'step')} "
            f"({some([code(d.name) for d in members])}): {verdict}"
            + (f" ({bare(said)})" if said else "")
            + (f"; differed: {some(differed, 3)}" if differed else "")
        )
    return lines


def _reason(verdict: str, evidence: str) -> str:
    """The reason to print beside a not-comparable verdict. That a pipeline is in the
    check and not the baseline, or the other way round, is what the verdict says about
    the pipeline the line starts with: said again in words, the path only came out
    escaped, `pipelines\\/new\\.py`, which is how a terminal shows it."""
    return "" if verdict in (words.PIPELINE_ADDED, words.PIPELINE_MISSING) else evidence


# Verdicts whose reason belongs to the whole pipeline, not to one of its steps.
_PIPELINE_WIDE = (words.PIPELINE_ADDED, words.PIPELINE_MISSING, words.MEASURED_OTHERWISE)


def _chart(d: StepDecision) -> str:
    """A bar per trial: the baseline's, this run's, and its re-runs', as Mermaid, which
    GitHub draws in comments. Names are Python identifiers and paths, quoted safely."""
    if d.rows_by_trial:
        # Every bar of its comparisons is as high as it goes: draw what decided it.
        values = d.rows_by_trial
        what, axis, top = "trials whose runs lost, added or repeated rows", "of 1", 1
    elif d.one_thread_by_trial:
        values = d.one_thread_by_trial
        what, axis, top = "trials in which it still differed at one thread", "of 1", 1
    elif d.outside_bound_by_trial:
        values = d.outside_bound_by_trial
        what, axis, top = "trials whose floats moved past the reassociation bound", "of 1", 1
    elif d.stress_only() and not any(d.baseline_fired_by_trial):
        # Every loop bar would be zero: draw the amplifier comparisons that decided it.
        # (A baseline whose loop differed was not amplified: its share is drawn below.)
        values = [*d.baseline_stress_fired_by_trial, d.now_stress_fired, *d.confirm_stress_fired]
        what = "amplifier comparisons that differed"
        top = max([*values, *d.confirm_stress_compared, d.now_stress_compared, 1])
        axis = f"of {d.now_stress_compared or top}"
    elif shares := _loop_or_amplifiers(d):
        # Some trials differed in the loop and others only under the amplifiers, out of
        # other counts: the share of each trial's comparisons that decided its score.
        values, what, axis, top = shares, _MIXED, "percent of them", 100
    else:
        values = [*d.baseline_fired_by_trial, d.now_fired or 0, *d.confirm_fired]
        what = "comparisons that differed"
        top = max([*values, d.now_compared or 1, 1])
        axis = f"of {d.now_compared or top}"
    labels = [f"b{i}" for i in range(1, len(d.baseline_fired_by_trial) + 1)]
    labels += ["now", *(f"re-run {i}" for i in range(1, len(d.confirm_fired) + 1))]
    title = f"{d.name}: {what}, baseline trials then this run".replace('"', "'")
    return (
        "```mermaid\nxychart-beta\n"
        f'    title "{title}"\n'
        f"    x-axis [{', '.join(json.dumps(label) for label in labels)}]\n"
        f'    y-axis "{axis}" 0 --> {top}\n'
        f"    bar [{', '.join(str(v) for v in values)}]\n```"
    )


_MIXED = "comparisons that differed, the amplifiers' where the loop's agreed"


def _loop_or_amplifiers(d: StepDecision) -> list[int]:
    """Per trial, the percent of the loop's comparisons that differed, or where none did,
    of the amplifiers'; empty unless some trial differed only under the amplifiers."""
    counts = (
        d.baseline_fired_by_trial,
        d.baseline_compared_by_trial,
        d.baseline_stress_fired_by_trial,
        d.baseline_stress_compared_by_trial,
    )
    confirms = {len(d.confirm_fired), len(d.confirm_stress_fired), len(d.confirm_stress_compared)}
    if len({len(c) for c in counts}) > 1 or len(confirms) > 1:
        return []  # a document written before these were kept, or edited
    loop = [
        *zip(d.baseline_fired_by_trial, d.baseline_compared_by_trial, strict=True),
        (d.now_fired or 0, d.now_compared or 0),
        *((k, d.now_compared or 0) for k in d.confirm_fired),
    ]
    stress = [
        *zip(d.baseline_stress_fired_by_trial, d.baseline_stress_compared_by_trial, strict=True),
        (d.now_stress_fired, d.now_stress_compared),
        *zip(d.confirm_stress_fired, d.confirm_stress_compared, strict=True),
    ]
    pairs = list(zip(loop, stress, strict=True))
    if not any(k == 0 < s for (k, _), (s, _) in pairs):
        return []
    if not all(0 <= k <= m for k, m in (*loop, *stress)):
        return []  # edited by hand: draw the loop's counts as they are
    return [
        round(100 * k / m) if k else (round(100 * s / n) if s else 0) for (k, m), (s, n) in pairs
    ]


@dataclass(frozen=True)
class _Cut:
    """What a list or table cut for GitHub's size limits says: what was cut to fit, and
    where the rest is."""

    this: str
    elsewhere: str

    @classmethod
    def for_comment(cls, summary_url: str | None) -> _Cut:
        where = f"the [job summary]({summary_url})" if summary_url else "the job summary"
        return cls("this comment under GitHub's size limit", where)

    @classmethod
    def for_summary(cls) -> _Cut:
        return cls(
            "this job summary under GitHub's 1 MiB limit",
            "the gate document (the action's `result` output, or `--json`)",
        )


def _bullets(title: str, lines: list[str], room: int, cut_from: _Cut) -> str:
    """A titled list of as many lines as fit in `room` characters, and a count of the rest."""
    kept: list[str] = []
    used = len(title) + 2
    for line in lines:
        if used + len(line) + 3 > room - 200:  # leave room for the note below
            break
        kept.append(f"- {line}")
        used += len(line) + 3
    text = f"{title}\n\n" + "\n".join(kept)
    cut = len(lines) - len(kept)
    if cut:
        text += f"\n- {cut} more not shown here, to keep {cut_from.this}; {cut_from.elsewhere} has them all."
    return text


def _details(
    summary: str, headers: list[str], rows: list[list[str]], budget: int, cut_from: _Cut
) -> str:
    kept = list(rows)
    while True:
        cut = len(rows) - len(kept)
        note = ""
        if cut:
            note = f"\n\n{cut} more row{'s' if cut != 1 else ''} cut to keep {cut_from.this}; {cut_from.elsewhere} has every step."
        block = (
            f"<details><summary>{summary}</summary>\n\n{table(headers, kept)}{note}\n\n</details>"
        )
        if len(block) <= budget or not kept:
            return block
        kept = kept[: max(0, len(kept) - max(1, len(kept) // 10))]


@dataclass(frozen=True)
class Posted:
    action: str  # created, edited, unchanged, written-to-file, or failed
    url: str | None = None
    path: str | None = None
    reason: str | None = None


def post_sticky(
    *,
    api_url: str,
    token: str,
    repository: str,
    number: int,
    body: str,
    fallback: Path,
    save: Callable[[Path, bytes], None],
) -> Posted:
    """Create or edit the one comment carrying this body's marker; fall back to a file on 403."""
    # PyGithub takes a third of a second to import; only a command that posts pays for it.
    import requests
    from github import GithubException

    mark = body.split("\n", 1)[0]
    gh = _client(api_url, token)
    try:
        try:
            login: str | None = gh.get_user().login
        except GithubException:
            # The workflow token and GitHub App tokens cannot read /user: they post as
            # a bot whose name we cannot know in advance.
            login = None
        issue = gh.get_repo(repository).get_issue(number)
        existing = None
        for comment in issue.get_comments():
            if not (comment.body or "").startswith(mark):
                continue
            # Ours is the marker's comment by the account we are, or, when we cannot
            # tell who we are, by a bot: never a person's comment that copied the marker.
            if (comment.user.login == login) if login else comment.user.type == "Bot":
                existing = comment
                break
        if existing is not None:
            if existing.body == body:
                return Posted("unchanged", existing.html_url)
            existing.edit(body)
            return Posted("edited", existing.html_url)
        created = issue.create_comment(body)
        return Posted("created", created.html_url)
    except GithubException as exc:
        reason = (
            f"{exc.status}: {exc.data.get('message') if isinstance(exc.data, dict) else exc.data}"
        )
        if exc.status in (401, 403, 404):
            save(fallback, body.encode("utf-8"))  # atomically: a reader never sees half
            return Posted("written-to-file", path=str(fallback), reason=reason)
        return Posted("failed", reason=f"GitHub answered {reason} after {RETRIES} retries")
    except requests.RequestException as exc:
        # Out of retries (urllib3 gives up with a RetryError) or no connection at all.
        return Posted("failed", reason=f"{type(exc).__name__}: {exc}")
    finally:
        gh.close()


def find_pull_request(
    *,
    api_url: str,
    token: str,
    repository: str,
    head_repository: str,
    head_branch: str,
    head_sha: str,
) -> int | None:
    """The open pull request into `repository` whose head is exactly `head_sha`, by asking
    GitHub, never the artifact: what the posting side trusts."""
    owner = head_repository.split("/", 1)[0]
    gh = _client(api_url, token)
    try:
        for pull in gh.get_repo(repository).get_pulls(state="open", head=f"{owner}:{head_branch}"):
            if pull.head.sha == head_sha:
                return pull.number
        return None
    finally:
        gh.close()


def _client(api_url: str, token: str):
    """A PyGithub client with its own retry (5xx and rate-limited 403s, with backoff 0, 1,
    2 s) and its pauses between requests. Imported here: PyGithub takes a third of a
    second to import, and only a command that talks to GitHub pays for it."""
    from github import Auth, Github, GithubRetry

    return Github(
        base_url=api_url,
        auth=Auth.Token(token),
        retry=GithubRetry(total=RETRIES, backoff_factor=BACKOFF, max_rate_limit_wait=60),
        lazy=True,
        timeout=30,
        seconds_between_requests=BETWEEN_REQUESTS,
        seconds_between_writes=BETWEEN_WRITES,
    )
