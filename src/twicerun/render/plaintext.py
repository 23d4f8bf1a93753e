"""Markdown that twicerun wrote, as text for a terminal.

The gate's summary is Markdown, written for GitHub. `twicerun baseline compare` prints
the same document, and in a terminal its escapes, pipes and chart source are noise.
This is not a second renderer: it reads the Markdown back with markdown-it, the same
parser the tests check the comment with, and prints what a reader would have seen,
so the two cannot drift apart.

- headings and paragraphs: their text, escapes undone, emphasis and code marks gone;
- lists: two spaces and a dash; block quotes: indented (a `[!WARNING]` alert says
  WARNING:);
- tables: columns aligned by their widest cell;
- `<summary>` text as a line of its own, other HTML dropped;
- a Mermaid bar chart as its title over two aligned rows, the bars' labels and
  their values.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from twicerun.display import columns, ljust, rjust, widest

_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_ALERT = re.compile(r"^\[!(\w+)\]\s*")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def markdown_to_text(markdown: str) -> str:
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(markdown)
    blocks: list[str] = []
    i = 0
    quote = 0
    items: list[str] = []
    while i < len(tokens):
        t = tokens[i]
        indent = "  " * quote
        if t.type == "blockquote_open":
            quote += 1
        elif t.type == "blockquote_close":
            quote -= 1
        elif t.type == "heading_open":
            blocks.append(indent + _inline(tokens[i + 1]))
            i += 2
        elif t.type == "list_item_open":
            items.append("- ")
        elif t.type == "list_item_close":
            items.pop()
        elif t.type == "paragraph_open":
            text = _inline(tokens[i + 1])
            alert = _ALERT.match(text)
            if alert:  # a GitHub alert: "> [!WARNING]" starts the quote
                rest = text[alert.end() :]
                text = f"{alert.group(1).upper()}: {rest}" if rest else alert.group(1).upper()
            bullet = items[-1] if items else ""
            blocks.append(indent + ("  " + bullet if bullet else "") + text)
            i += 2
        elif t.type == "fence":
            lines = _chart(t.content) if t.info.strip() == "mermaid" else t.content.splitlines()
            blocks.append("\n".join(indent + "  " + line for line in lines))
        elif t.type == "html_block":
            blocks.extend(indent + " ".join(s.split()) for s in _SUMMARY.findall(t.content))
        elif t.type == "table_open":
            end = next(j for j in range(i, len(tokens)) if tokens[j].type == "table_close")
            blocks.append(_table(tokens[i:end], indent))
            i = end
        i += 1
    return "\n\n".join(b for b in blocks if b.strip()) + "\n"


def _inline(token: Token) -> str:
    parts = []
    for child in token.children or []:
        if child.type == "code_inline" and " " in child.content.strip():
            # A command to run: without its backticks it reads as part of the sentence.
            parts.append(f"`{child.content}`")
        elif child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def _table(tokens: list[Token], indent: str) -> str:
    rows: list[list[str]] = []
    for t in tokens:
        if t.type == "tr_open":
            rows.append([])
        elif t.type == "inline" and rows:
            rows[-1].append(_inline(t))
    widths = [widest(row[c] for row in rows if c < len(row)) for c in range(len(rows[0]))]
    lines = [
        indent + "  ".join(ljust(cell, widths[c]) for c, cell in enumerate(row)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)


def _chart(source: str) -> list[str]:
    """An `xychart-beta` bar chart as text: its title, then labels over values."""
    title, axis, labels, values = "", "", [], []
    for line in source.splitlines():
        words = line.split(None, 1)
        if not words:
            continue
        rest = words[1] if len(words) > 1 else ""
        if words[0] == "title":
            title = "".join(_QUOTED.findall(rest)[:1])
        elif words[0] == "y-axis":
            axis = "".join(_QUOTED.findall(rest)[:1])
        elif words[0] == "x-axis":
            labels = _QUOTED.findall(rest)
        elif words[0] == "bar":
            values = [v.strip() for v in rest.strip().strip("[]").split(",") if v.strip()]
    if not values or len(labels) != len(values):
        return []
    widths = [max(columns(a), columns(b)) for a, b in zip(labels, values, strict=True)]
    return [
        f"{title} ({axis})" if axis else title,
        "  " + "  ".join(rjust(a, w) for a, w in zip(labels, widths, strict=True)),
        "  " + "  ".join(rjust(b, w) for b, w in zip(values, widths, strict=True)),
    ]
