"""Generated regions of a Markdown file, between marker comments on their own lines:

    <!-- twicerun:NAME -->
    ...rendered by twicerun report; edits here are overwritten...
    <!-- /twicerun:NAME -->

Markers are found by parsing the file with markdown-it-py rather than by
searching text, so a marker shown inside a fenced or indented code block (as
this docstring's would be in a README) is not a marker. A marker inside a
paragraph is refused, as are nested, duplicated, unclosed and stray markers,
each with its line number.

Updating rewrites only the lines between a pair of markers, keeps the file's
line endings (CRLF stays CRLF) and whether it ends in a newline, and leaves a
file whose blocks already match untouched. A block inside a blockquote or a list
item keeps its `> ` or indentation on every line it writes.

Lines are split the way markdown-it splits them (at CR LF, CR or LF only), never
with `str.splitlines`, which also breaks at form feeds, U+2028 and the like and
would put every line number after one of those out of step with the parser's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

# A name is letters (any script's: a pipeline may be called 集計.py), digits, `_`, `.`, `-`.
NAME = r"[\w.-]+"
MARKER = re.compile(rf"<!--\s*(/?)twicerun:({NAME})\s*-->")
# What a name cannot hold, for turning a file name into one.
NAME_GAP = re.compile(r"[^\w.-]+")
_NEWLINE = re.compile(r"\r\n?|\n")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """`text` in lines as markdown-it counts them."""
    lines, start = [], 0
    for found in _NEWLINE.finditer(text):
        lines.append(text[start : found.end() if keepends else found.start()])
        start = found.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


class MarkerError(ValueError):
    """The markers in a file cannot be paired; `line` is 1-based."""

    def __init__(self, path: str, line: int, message: str):
        self.path = path
        self.line = line
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class Block:
    """A generated region: its name, the 0-based lines of its two markers, and what
    stands before the opening marker on its line (a blockquote's `> `, a list
    item's indentation), which every line inside repeats."""

    name: str
    open_line: int
    close_line: int
    prefix: str = ""


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _blocks_only() -> MarkdownIt:
    # Inline parsing of every paragraph was half of what the pre-commit hook spent on a
    # long README; a paragraph is parsed inline only when its text looks like a marker.
    return _parser().disable("inline")


# A byte order mark, which Windows editors put before a README's first line and GitHub
# does not show. Parsed with it, a marker on that line is paragraph text.
BOM = "\ufeff"


def find_blocks(text: str, path: str = "<text>") -> list[Block]:
    # Not a newline, so every line number is the same without it; and `update` rewrites
    # only the lines between markers, so it stays in the file.
    text = text.removeprefix(BOM)
    lines = split_lines(text)
    events: list[tuple[int, bool, str]] = []
    parser = _blocks_only()
    for token in parser.parse(text):
        if token.type == "html_block" and token.map:
            for offset, line in enumerate(token.content.split("\n")):
                found = MARKER.search(line)
                if not found:
                    continue
                number = token.map[0] + offset
                if line.strip() != found.group(0):
                    raise MarkerError(
                        path, number + 1, f"{found.group(0)} must be alone on its line"
                    )
                events.append((number, found.group(1) == "/", found.group(2)))
        elif token.type == "inline" and token.map and MARKER.search(token.content):
            (parsed,) = _parser().parseInline(token.content)
            for child in parsed.children or []:
                found = MARKER.search(child.content) if child.type == "html_inline" else None
                if found:
                    number = _line_of(lines, token.map, found.group(0))
                    raise MarkerError(
                        path,
                        number + 1,
                        f"{found.group(0)} is inside a paragraph; put it on a line of its own, "
                        f"with a blank line before it",
                    )
    blocks: list[Block] = []
    seen: dict[str, int] = {}
    open_: tuple[int, str] | None = None
    for number, closing, name in events:
        if not closing:
            if open_ is not None:
                raise MarkerError(
                    path,
                    number + 1,
                    f"<!-- twicerun:{name} --> opens inside twicerun:{open_[1]}, which opened at "
                    f"line {open_[0] + 1} and is not closed yet; blocks cannot nest",
                )
            if name in seen:
                raise MarkerError(
                    path,
                    number + 1,
                    f"twicerun:{name} appears twice (first at line {seen[name] + 1}); "
                    f"each table is generated into one block",
                )
            open_ = (number, name)
            seen[name] = number
        else:
            if open_ is None or open_[1] != name:
                expected = f"; twicerun:{open_[1]} is the one open" if open_ else ""
                raise MarkerError(
                    path, number + 1, f"<!-- /twicerun:{name} --> closes nothing{expected}"
                )
            raw = lines[open_[0]]
            blocks.append(Block(name, open_[0], number, raw[: raw.index("<!--")]))
            open_ = None
    if open_ is not None:
        raise MarkerError(
            path,
            open_[0] + 1,
            f"twicerun:{open_[1]} is never closed; add <!-- /twicerun:{open_[1]} --> after it",
        )
    return blocks


def _line_of(lines: list[str], span: list[int], needle: str) -> int:
    for number in range(span[0], span[1]):
        if needle in lines[number]:
            return number
    return span[0]


def newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _inner(content: str, newline: str, prefix: str = "") -> list[str]:
    """The lines a block holds: a blank line, the content, a blank line, each behind
    the block's prefix (a blank line takes the prefix without trailing spaces)."""
    body = content.strip("\n").split("\n")
    blank = prefix.rstrip() + newline
    return [
        blank,
        *(
            (prefix + line).rstrip() + newline if not line else prefix + line + newline
            for line in body
        ),
        blank,
    ]


def expected(content: str, newline: str, prefix: str = "") -> str:
    return "".join(_inner(content, newline, prefix))


def update(
    text: str, rendered: dict[str, str], path: str = "<text>", blocks: list[Block] | None = None
) -> tuple[str, list[str]]:
    """The text with every block whose content differs rewritten; and the names rewritten.
    `blocks`: what find_blocks found in `text`, for a caller that already asked."""
    blocks = find_blocks(text, path) if blocks is None else blocks
    newline = newline_of(text)
    lines = split_lines(text, keepends=True)
    changed = []
    # From the bottom up, so earlier line numbers stay valid.
    for block in sorted(blocks, key=lambda b: b.open_line, reverse=True):
        if block.name not in rendered:
            continue
        want = _inner(rendered[block.name], newline, block.prefix)
        if lines[block.open_line + 1 : block.close_line] != want:
            lines[block.open_line + 1 : block.close_line] = want
            changed.append(block.name)
    return "".join(lines), sorted(changed)


def stale(
    text: str, rendered: dict[str, str], path: str = "<text>", blocks: list[Block] | None = None
) -> dict[str, str]:
    """Blocks whose content does not match what would be rendered, each with a unified diff.
    `blocks`: what find_blocks found in `text`, for a caller that already asked."""
    newline = newline_of(text)
    lines = split_lines(text, keepends=True)
    found = {}
    for block in find_blocks(text, path) if blocks is None else blocks:
        if block.name not in rendered:
            continue
        have = "".join(lines[block.open_line + 1 : block.close_line])
        want = expected(rendered[block.name], newline, block.prefix)
        if have != want:
            diff = difflib.unified_diff(
                split_lines(have.replace("\r\n", "\n"), keepends=True),
                split_lines(want.replace("\r\n", "\n"), keepends=True),
                fromfile=f"{path} (twicerun:{block.name})",
                tofile="rendered now",
            )
            found[block.name] = "".join(diff)
    return found
