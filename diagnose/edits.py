"""Text edits at AST positions, and the unified diff a variant is shown as.

AST columns count UTF-8 bytes; Python strings count characters. Every position goes through
`_offset` so that a line with non-ASCII text before the edit still lands in the right place.
"""
from __future__ import annotations

import difflib


def _offset(lines: list[str], line: int, col: int) -> int:
    before = sum(len(x) for x in lines[: line - 1])
    text = lines[line - 1] if line - 1 < len(lines) else ""
    return before + len(text.encode("utf-8")[:col].decode("utf-8", "ignore"))


def apply_edits(source: str, edits: list[tuple[list[int], str]]) -> str:
    """edits: ([line, col, end_line, end_col], replacement); applied back to front so spans stay valid."""
    lines = source.splitlines(keepends=True)
    spans = sorted(((_offset(lines, s[0], s[1]), _offset(lines, s[2], s[3]), text) for s, text in edits),
                   reverse=True)
    out = source
    for start, end, text in spans:
        out = out[:start] + text + out[end:]
    return out


def line_span(first: int, last: int) -> list[int]:
    """A span covering whole lines first..last, newline included."""
    return [first, 0, last + 1, 0]


def unified_diff(before: str, after: str, name: str = "submission.py") -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}", n=2))
