"""The cause class a triage table groups a row under: where in the harness's run it failed, and of what kind.

compile step · import · first call (compile, autotune, build, search, or other work at each new shape) · steady
state · harness rule · refusal · crash · wrong · outside the submission · passed · inconclusive · lost
"""
from __future__ import annotations

from typing import Protocol

ORDER = ["compile step", "import", "first call", "steady state", "harness rule", "refusal", "crash", "wrong",
         "outside the submission", "inconclusive", "lost", "passed"]


class _Said(Protocol):
    """What of a row (rows.Row) its class is read from: rows.py imports this module, never this one it."""
    status: str | None
    stage: str | None
    phase: str | None


def cause_class(row: _Said, session: dict | None) -> str:
    status = row.status
    if status == "refused":
        return "refusal"
    if status in ("lost", "inconclusive"):
        return status
    if status == "ok":
        return "passed"
    top = ((session or {}).get("causes") or [None])[0] or {}
    phase, stage = row.phase or "", row.stage or ""
    if top.get("kind") == "harness_rule":
        return "harness rule"
    if top.get("kind") in ("stale_lock",) or (session or {}).get("verdict", {}).get("outside"):
        return "outside the submission"
    if stage == "compile" or phase == "script":
        return "compile step"
    if phase == "submission_import":
        return "import"
    if phase.startswith("first_call:") and status in ("timeout", "at_risk"):
        kinds = sorted({k for s in top.get("suspects") or [] if (k := first_call_kind(s))})
        return "first call" + (f" ({', '.join(kinds)})" if kinds else "")
    if status == "crash":
        return "crash"
    if status == "wrong":
        return "wrong"
    return "steady state"


def first_call_kind(probe: str) -> str | None:
    """The word a probe's suspect groups a first-call timeout under (its TRIAGE), or None."""
    from probes import door  # each probe names its own class
    return door.value(probe, "TRIAGE")


def order(cls: str) -> int:
    base = cls.split(" (")[0]
    return ORDER.index(base) if base in ORDER else len(ORDER)
