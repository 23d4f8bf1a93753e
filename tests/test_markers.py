"""Marker blocks in Markdown: found by parsing, refused with a line number, rewritten exactly."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from twicerun.render.markers import MarkerError, find_blocks, stale, update

TABLE = "| a | b |\n|---|---|\n| 1 | 2 |\n"

# (input bytes, rendered content, expected output bytes)
UPDATES = [
    pytest.param(
        b"# Title\n\n<!-- twicerun:t -->\nold\n<!-- /twicerun:t -->\n\ntail\n",
        b"# Title\n\n<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- /twicerun:t -->\n\ntail\n",
        id="lf",
    ),
    pytest.param(
        b"# Title\r\n\r\n<!-- twicerun:t -->\r\nold\r\n<!-- /twicerun:t -->\r\n\r\ntail\r\n",
        b"# Title\r\n\r\n<!-- twicerun:t -->\r\n\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n\r\n"
        b"<!-- /twicerun:t -->\r\n\r\ntail\r\n",
        id="crlf-stays-crlf",
    ),
    pytest.param(
        b"<!-- twicerun:t -->\nold\n<!-- /twicerun:t -->",
        b"<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- /twicerun:t -->",
        id="no-final-newline-stays-without",
    ),
    pytest.param(
        b"```\n<!-- twicerun:t -->\n```\n\n<!-- twicerun:t -->\nold\n<!-- /twicerun:t -->\n",
        b"```\n<!-- twicerun:t -->\n```\n\n<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        b"<!-- /twicerun:t -->\n",
        id="markers-in-a-fence-are-text",
    ),
    pytest.param(
        "caf\u00e9 \u2014 ok\n\n<!-- twicerun:t -->\n<!-- /twicerun:t -->\n".encode(),
        "caf\u00e9 \u2014 ok\n\n<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "<!-- /twicerun:t -->\n".encode(),
        id="non-ascii-and-an-empty-block",
    ),
    pytest.param(
        # Windows editors save README.md with a byte order mark, which GitHub does not show;
        # a marker on the first line was refused as "inside a paragraph".
        b"\xef\xbb\xbf<!-- twicerun:t -->\nold\n<!-- /twicerun:t -->\n",
        b"\xef\xbb\xbf<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- /twicerun:t -->\n",
        id="a-byte-order-mark-stays-and-is-not-text",
    ),
]


@pytest.mark.parametrize(("before", "after"), UPDATES)
def test_update_rewrites_exactly_the_block(before, after):
    text = before.decode("utf-8")
    new, changed = update(text, {"t": TABLE})
    assert new.encode("utf-8") == after
    assert changed == ["t"]
    again, changed_again = update(new, {"t": TABLE})
    assert (again, changed_again) == (new, [])
    assert stale(new, {"t": TABLE}) == {}


def test_a_block_that_matches_is_not_rewritten_and_a_stale_one_has_a_diff():
    current = "<!-- twicerun:t -->\n\n| a | b |\n|---|---|\n| 1 | 9 |\n\n<!-- /twicerun:t -->\n"
    found = stale(current, {"t": TABLE}, "README.md")
    assert list(found) == ["t"]
    assert "-| 1 | 9 |\n+| 1 | 2 |\n" in found["t"]
    assert found["t"].startswith("--- README.md (twicerun:t)\n+++ rendered now\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "Some text <!-- twicerun:t --> inline.\n",
            "README.md:1: <!-- twicerun:t --> is inside a paragraph; put it on a line of its own, "
            "with a blank line before it",
        ),
        (
            "\n\nA paragraph\nthat goes on <!-- /twicerun:t --> here.\n",
            "README.md:4: <!-- /twicerun:t --> is inside a paragraph; put it on a line of its own, "
            "with a blank line before it",
        ),
        (
            "<!-- twicerun:a -->\n<!-- twicerun:b -->\n<!-- /twicerun:b -->\n<!-- /twicerun:a -->\n",
            "README.md:2: <!-- twicerun:b --> opens inside twicerun:a, which opened at line 1 and "
            "is not closed yet; blocks cannot nest",
        ),
        (
            "<!-- twicerun:a -->\n<!-- /twicerun:a -->\n\n<!-- twicerun:a -->\n<!-- /twicerun:a -->\n",
            "README.md:4: twicerun:a appears twice (first at line 1); each table is generated into "
            "one block",
        ),
        (
            "x\n\n<!-- twicerun:a -->\nbody\n",
            "README.md:3: twicerun:a is never closed; add <!-- /twicerun:a --> after it",
        ),
        (
            "x\n\n<!-- /twicerun:a -->\n",
            "README.md:3: <!-- /twicerun:a --> closes nothing",
        ),
        (
            "<!-- twicerun:a -->\n<!-- /twicerun:b -->\n",
            "README.md:2: <!-- /twicerun:b --> closes nothing; twicerun:a is the one open",
        ),
        (
            "<!-- twicerun:a --> <!-- /twicerun:a -->\n",
            "README.md:1: <!-- twicerun:a --> must be alone on its line",
        ),
    ],
)
def test_markers_that_do_not_pair_are_refused_with_their_line(text, message):
    with pytest.raises(MarkerError) as info:
        find_blocks(text, "README.md")
    assert str(info.value) == message


def test_an_indented_marker_is_code_and_not_a_marker():
    assert find_blocks("text\n\n    <!-- twicerun:a -->\n") == []


def test_blocks_are_found_with_their_lines():
    text = "# T\n\n<!-- twicerun:a -->\nx\n<!-- /twicerun:a -->\n\n<!-- twicerun:b -->\n<!-- /twicerun:b -->\n"
    assert [(b.name, b.open_line, b.close_line) for b in find_blocks(text)] == [
        ("a", 2, 4),
        ("b", 6, 7),
    ]


TABLE = "| a | b |\n|---|---|\n| 1 | 2 |"


@pytest.mark.parametrize("odd", ["\u2028", "\u2029", "\x85", "\x0c", "\x0b"])
def test_a_line_break_python_knows_and_markdown_does_not_moves_nothing(odd):
    text = f"# t\n\nprose with {odd} inside\n\n<!-- twicerun:x -->\nold\n<!-- /twicerun:x -->\n\nafter\n"
    new, changed = update(text, {"x": TABLE})
    assert changed == ["x"]
    assert new == (
        f"# t\n\nprose with {odd} inside\n\n<!-- twicerun:x -->\n\n{TABLE}\n\n"
        "<!-- /twicerun:x -->\n\nafter\n"
    )
    assert update(new, {"x": TABLE}) == (new, [])
    assert stale(new, {"x": TABLE}) == {}


@pytest.mark.parametrize(
    ("prefix", "tag"),
    [("> ", "blockquote"), ("   ", "li")],
)
def test_a_block_inside_a_blockquote_or_a_list_item_stays_inside_it(prefix, tag):
    opener = "> intro\n>\n" if prefix == "> " else "1. intro\n\n"
    text = f"{opener}{prefix}<!-- twicerun:x -->\n{prefix}<!-- /twicerun:x -->\n"
    new, changed = update(text, {"x": TABLE})
    assert changed == ["x"]
    for line in new.splitlines()[2:]:
        assert line.startswith(prefix.rstrip()), repr(line)
    assert update(new, {"x": TABLE}) == (new, [])
    html = MarkdownIt("commonmark").enable("table").render(new)
    inner = html.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]
    assert "<table>" in inner
