"""Text edits at AST positions, the shared edits probes make, and the unified diff a variant is shown as.

AST columns count UTF-8 bytes; Python strings count characters. Every position goes through
`_offset` so that a line with non-ASCII text before the edit still lands in the right place.
"""
from __future__ import annotations

import difflib
import re


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


def set_kw(source: str, ordinal: int | None, kw: str, value: str, suspect: str = "compile") -> str:
    """Set keyword `kw` to the source text `value` on compile site `ordinal` (None: every site)."""
    from diagnose.source.scan import scan_source
    edits = []
    for s in scan_source(source, finders=()).of(suspect):     # the compile sites: the scan's own
        d = s.details
        if ordinal is not None and d["ordinal"] != ordinal or not d.get("span"):
            continue
        edits.append(kw_edit(source, d["kw_spans"], kw, value, bare=d["span"] if d["bare"] else None,
                             call=d.get("call_span")))
    return apply_edits(source, edits)


def kw_edit(source: str, kw_spans: dict, kw: str, value: str, bare: list | None, call: list | None):
    """The edit that sets `kw=value` on a call or a decorator: its value replaced where the keyword is there;
    `(kw=value)` after a bare name (`bare`: its span); else added before the call's closing parenthesis."""
    if kw in kw_spans:
        return kw_spans[kw], value
    if bare:
        return [bare[2], bare[3], bare[2], bare[3]], f"({kw}={value})"
    # text up to the closing parenthesis (AST columns are UTF-8 bytes)
    inner = source.splitlines()[call[2] - 1].encode()[: call[3] - 1].decode().rstrip()
    sep = "" if inner.endswith("(") else ", "
    return [call[2], call[3] - 1, call[2], call[3] - 1], f"{sep}{kw}={value}"


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def edited_lines(before: str, after: str) -> list[int]:
    """Lines of `after` that an edit added or changed; for a pure deletion, the line that now stands
    where the deleted ones were (so that whether the edit was reached can still be watched)."""
    out: set[int] = set()
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    for line in diff:
        m = _HUNK.match(line)
        if m:
            start, count = int(m.group(1)), int(m.group(2) or 1)
            out |= set(range(start, start + count)) if count else {start + 1}
    n = len(after.splitlines())
    return sorted(x for x in out if 1 <= x <= n)


def changed_range(before: str, after: str) -> tuple[int, int]:
    """The characters of `before` an edit replaced, from the first that differs to the last (an edit of several
    places spans them all): two edits whose ranges meet touch the same text and are alternatives, not parts."""
    n = min(len(before), len(after))
    start = next((i for i in range(n) if before[i] != after[i]), n)
    end = 0
    while end < n - start and before[len(before) - 1 - end] == after[len(after) - 1 - end]:
        end += 1
    return start, len(before) - end
