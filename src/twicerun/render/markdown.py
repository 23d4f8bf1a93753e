"""Markdown tables, and escaping that keeps anything a pipeline wrote from becoming markup.

One renderer for every caller: the README's generated tables, the PR comment and
the job summary all go through `table`. Text from outside twicerun (step names,
artifact names, values, error messages) goes through `code` or `plain` first:

- `code` puts an identifier in a code span, with a fence longer than any run of
  backticks inside it, pipes escaped (GFM splits cells on them even in code)
  and line breaks flattened.
- `bare` leaves text bare when it is made only of letters, digits, spaces and
  punctuation that starts no markup where it stands (twicerun's own vocabulary,
  version stamps), so a terminal shows `FLOAT_DRIFT`, not `FLOAT\\_DRIFT`;
  anything else goes through `plain`.
- `sentence` is `bare` for a sentence of twicerun's own that names a command or
  a path between backticks: each of those is a `code` span.
- `plain` escapes every ASCII punctuation character with a backslash (which
  CommonMark defines as literal for all of them) after turning &, < and > into
  entities, so no emphasis, link, HTML tag, comment or table cell can start.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_PUNCTUATION = re.compile(r"([!\"#$%'()*+,\-./:;=?@\[\\\]^_`{|}~])")
_BACKTICKS = re.compile(r"`+")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def plain(text: object) -> str:
    """Text that renders as exactly itself: no markup, no HTML, no cell breaks."""
    escaped = html.escape(_one_line(str(text)), quote=False)
    # html.escape produced &amp; &lt; &gt;; their & and ; must survive the next pass.
    parts = re.split(r"(&(?:amp|lt|gt);)", escaped)
    return "".join(
        p if p in ("&amp;", "&lt;", "&gt;") else _PUNCTUATION.sub(r"\\\1", p) for p in parts
    )


# A letter or digit first (no bullet, heading or block quote), then letters, digits,
# spaces and , . ; : = - ; an underscore only between two letters or digits, where
# CommonMark never reads it as emphasis. No * ` [ < & | \ ~ ! @ /, so no span, link or
# cell break. Digits then a dot and a space would start an ordered list: not bare.
_BARE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ,.;:=\-]|(?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))*")
_ORDERED_LIST = re.compile(r"[0-9]+\.(?: |$)")


def bare(text: object) -> str:
    """Plain words that render as exactly themselves, with no backslashes where none is
    needed; anything that could be markup is escaped as `plain` does."""
    flat = _one_line(str(text))
    # GFM links a bare www. address even with no scheme.
    if _BARE.fullmatch(flat) and not _ORDERED_LIST.match(flat) and "www." not in flat.lower():
        return flat
    return plain(flat)


_SPAN = re.compile(r"`([^`]+)`")


def sentence(text: object) -> str:
    """A sentence of twicerun's own that names a command or a path between backticks
    (`twicerun baseline update ...`): each such span as `code`, the words around it as
    `bare`. Escaping it whole showed the backticks as characters and the command as
    words; what is inside a span still cannot break out of it."""
    flat = _one_line(str(text))
    out, at = [], 0
    for m in _SPAN.finditer(flat):
        out += [_words(flat[at : m.start()]), code(m.group(1), cell=False)]
        at = m.end()
    out.append(_words(flat[at:]))
    return "".join(out)


def _words(text: str) -> str:
    """`bare`, keeping the spaces at either end that join it to a code span."""
    if not text.strip():
        return text
    lead = text[: len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()) :]
    return f"{lead}{bare(text)}{trail}"


def cell(text: object) -> str:
    """Text twicerun wrote itself, made safe for a table cell: one line, pipes escaped."""
    return _one_line(str(text)).replace("|", "\\|")


def code(text: object, *, cell: bool = True) -> str:
    """An identifier in a code span that no content can break out of; `cell=False` for
    one in a paragraph, where a pipe splits nothing and its backslash would show."""
    body = _one_line(str(text))
    if cell:
        body = body.replace("|", "\\|")
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


# A column's alignment, as its mark in a GFM table's delimiter row.
ALIGNMENT_MARKS = {"left": "---", "right": "--:", "center": ":-:"}


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None
) -> str:
    """A GFM table. Cells are used as given: escape outside text before it gets here."""
    align = list(align or ["left"] * len(headers))
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(ALIGNMENT_MARKS[a] for a in align) + "|",
    ]
    for row in rows:
        cells = [str(c).replace("\n", " ") for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
