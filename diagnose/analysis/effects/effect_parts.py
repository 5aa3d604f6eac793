"""What one edit of a loop's count took away besides the count: the calls it deleted from the count expression
(`range(_warmup_steps(x))` -> `range(1)`), and whether a run took the two apart (cut the count with the call still
made). Pure; the bisector weighs a cause by it and the audit (audit_parts.py) checks the cause against it.

A call counts where it is worth separating from the count: a call into the file's own functions, or one whose line
(the loop's header: its count expression, while the passes run on the lines below) held measurable time in the
baseline.
"""
from __future__ import annotations

from diagnose.analysis.effects.effect_lines import line_map
from diagnose.analysis.verdict.comparison import compare
from diagnose.facts import observed
from diagnose.facts.count_calls import count_calls, dropped
from diagnose.facts.measures import NOISE_ABS
from diagnose.session import Role, Run, Session
from diagnose.status import Compared


def _edited(s: Session, r: Run) -> dict[int, str]:
    """The variant's edited lines, by the baseline line each replaced in place."""
    src = s.submission.get("source") or ""
    lm = line_map(r.variant, len(src.splitlines()))
    return {b: lm.inserted.get(v, "") for v, b in lm.changed.items()}


def taken_calls(s: Session, base: Run, r: Run) -> list[tuple[int, dict]]:
    """The calls the run's edit took away from a `for` loop's range() count: (the header's line, the call)."""
    src = s.submission.get("source") or ""
    out = []
    for b, text in _edited(s, r).items() if r.variant else []:
        held = sum(sec for _, sec, _ in observed.line_seconds(base, b))
        out += [(b, c) for c in dropped(count_calls(src, b), text) if c["own"] or held >= NOISE_ABS]
    return out


def apart(s: Session, base: Run, probe: str, line: int, call: dict) -> list[tuple[Run, str]]:
    """Runs of the probe that cut the count at `line` and still made the call, with how each compared (only those
    that decided: got past the failure, or failed as the baseline did)."""
    src_line = (s.submission.get("source") or "").splitlines()[line - 1].strip()
    out = []
    for r in s.runs:
        text = _edited(s, r).get(line) if r.role == Role.SINGLE and r.probe == probe and r.variant else None
        if text is None or text.strip() == src_line or dropped([call], text):
            continue
        verdict = compare(s, base, r)
        if verdict in (Compared.FIXED, Compared.SAME, Compared.MOVED):
            out.append((r, verdict))
    return out


def not_apart(s: Session, base: Run, r: Run) -> list[str]:
    """The calls r's edit took away with a loop's count that no run took apart from it, as `text` at L<line>."""
    return [f"`{c['text']}` at L{ln}" for ln, c in taken_calls(s, base, r) if not apart(s, base, r.probe, ln, c)]
