"""Workflow commands: annotations on the lines of the steps that changed, and step outputs.

GitHub reads `::error file=F,line=L,title=T::message` from a step's standard
output (and its standard error). The message (data) and the properties are
escaped differently: data escapes %, CR and LF; a property value also escapes
':' and ',', which would otherwise end it. At most ten annotations per severity
are emitted, the line counting the rest among them (GitHub shows ten per
severity and drops the rest).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LIMIT = 10
SEVERITIES = ("error", "warning", "notice")

# U+2060 WORD JOINER: invisible, and not white space to the runner, which trims
# white space before looking for "::" at the start of a line.
_BREAK = "\u2060"


def neutralize(text: str) -> str:
    """Text that may carry pipeline data, made unable to issue a workflow command.

    The runner reads a line as a command when it starts with `::` after leading
    white space, or when `##[` appears anywhere in it (the older form). Both are
    broken with an invisible character, so a value such as
    `x\n::error file=README.md::...` or `::add-mask::...` prints as text.
    """
    lines = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("::"):
            cut = len(line) - len(stripped)
            line = f"{line[:cut]}:{_BREAK}{stripped[1:]}"
        lines.append(line.replace("##[", f"##{_BREAK}["))
    return "\n".join(lines)


def stop_commands() -> tuple[str, str]:
    """The line that stops the runner reading workflow commands, and the one that resumes
    it, for while the pull request's pipelines run.

    A runner reads commands from stdout and stderr alike, and a step's output is the pull
    request's code and data: a row that starts with `::add-mask::`, `::error` or
    `::stop-commands::` would mask log text, forge an annotation, or silence twicerun's
    own annotations after it. The token is random, so nothing the steps print ends the
    pause. Not a sandbox: the steps run in this process.
    """
    token = secrets.token_hex(16)
    return f"::stop-commands::{token}", f"::{token}::"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


@dataclass(frozen=True)
class Annotation:
    severity: str
    message: str
    title: str
    file: str | None = None
    line: int | None = None

    def command(self) -> str:
        properties = []
        if self.file:
            properties.append(f"file={escape_property(self.file)}")
        if self.line:
            properties.append(f"line={self.line}")
        properties.append(f"title={escape_property(self.title)}")
        return f"::{self.severity} {','.join(properties)}::{escape_data(self.message)}"


def commands(annotations: Sequence[Annotation]) -> list[str]:
    """The workflow commands to print, ten per severity and a count of the rest."""
    lines = []
    for severity in SEVERITIES:
        chosen = [a for a in annotations if a.severity == severity]
        # GitHub shows ten per severity, so the line counting the rest is one of the ten.
        shown = chosen if len(chosen) <= LIMIT else chosen[: LIMIT - 1]
        lines.extend(a.command() for a in shown)
        if len(chosen) > len(shown):
            rest = len(chosen) - len(shown)
            lines.append(
                f"::{severity} title={escape_property('twicerun')}::"
                + escape_data(
                    f"{rest} more {severity}{'s' if rest != 1 else ''} not shown; see the job summary"
                )
            )
    return lines


def write_outputs(path: Path, outputs: dict[str, str]) -> None:
    """Append step outputs to GITHUB_OUTPUT, each value between a random delimiter."""
    with open(path, "a", encoding="utf-8") as f:
        for name, value in outputs.items():
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_summary(path: Path, markdown: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")
