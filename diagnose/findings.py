"""The conclusions a session states, each a typed record naming the runs behind it: the verdict, each ranked
cause, each suspect cleared or left inconclusive, the fix and the cost of every working fix. claims.py turns
them into the sentences a report prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from diagnose.status import CauseKind, Confidence, Status


@dataclass
class Verdict:
    status: Status
    stage: str | None = None
    phase: str | None = None
    message: str = ""
    site: dict | None = None
    confirmed: bool = True      # a time-based verdict that no solo run could confirm says so
    note: str = ""              # why it is unconfirmed, or what this machine cannot judge
    runs: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        return cls(**{**d, "status": Status(d["status"])})


@dataclass
class Cause:
    rank: int
    suspects: list[str]
    kind: CauseKind             # status.CauseKind: saved as its text
    narrative: str
    confidence: Confidence
    changes_outcome: bool
    evidence: list[str]         # run ids
    site: dict | None = None
    sites: list[dict] = field(default_factory=list)
    seconds_saved: dict = field(default_factory=dict)
    confirmed: bool = True
    alternatives: list[str] = field(default_factory=list)   # other single toggles that also fix it
    hot_spot: dict | None = None
    state: str = ""             # how its runs differ in state kept between their processes, if they do

    @classmethod
    def from_dict(cls, d: dict) -> "Cause":
        return cls(**{**d, "confidence": Confidence(d["confidence"]), "kind": CauseKind(d["kind"])})


@dataclass
class Cleared:
    """A suspect verified not to be the cause: its toggle ran, and the failure stayed the same."""
    probe: str
    toggles: list[str]
    outcome: Status
    narrative: str
    evidence: list[str]
    confirmed: bool = True

    @classmethod
    def from_dict(cls, d: dict) -> "Cleared":
        return cls(**{**d, "outcome": Status(d["outcome"])})


@dataclass
class Inconclusive:
    """A suspect the runs cannot speak for, and why. `probe` is UNEXPLAINED when it is the failure itself
    that the runs cannot place."""
    probe: str
    reason: str
    evidence: list[str] = field(default_factory=list)
    site: dict | None = None    # NOT_LOOKED: where the failure happened in the submission, when known


@dataclass
class FixCost:
    run: str
    probe: str | None
    toggle: str | None
    steady_us: float | None
    per_case_us: dict
    delta_us: float | None
    # the stages this alternative did not run because the fix was chosen before it (fix_choice.NOT_NEEDED): its
    # steady state is measured, its pass of these stages is not
    not_run: list[str] = field(default_factory=list)


@dataclass
class Fix:
    diff: str
    steady_us: float | None
    run: str
    toggle: str | None
    probe: str | None
    costs: list[FixCost] = field(default_factory=list)
    state: str = ""             # how the fix's run differs from the baseline in state kept between processes

    @classmethod
    def from_dict(cls, d: dict) -> "Fix":
        return cls(**{**d, "costs": [FixCost(**c) for c in d.get("costs", [])]})


def rule_in(rules: list[dict], text: str) -> dict | None:
    """The harness rule (tasks/rules.py: what the evaluator sets) that a failure's message names by its
    variable, if any."""
    return next((r for r in rules if r["name"] in (text or "")), None)


CUT = " (…)"
_CLAUSE = re.compile(r"[.;:,!?](?=\s)")


def clip(text: str, limit: int) -> str:
    """The one way a report, the console or a triage row shortens text: `text` whole when it fits in `limit`
    characters, else cut at the last clause or sentence end (". ", "; ", ", " ...) in its second half, else after
    the last whole word, and " (…)" says it was cut. Never mid-word: a text with no word boundary in reach keeps
    none of its first word. For the submission's own output, messages, paths and stack lines (evidence, capped),
    and for a table cell or a triage row that quotes a statement the report holds whole; a statement itself is
    never cut."""
    text = str(text)
    if len(text) <= limit:
        return text
    room = max(0, limit - len(CUT))
    head = text[:room + 1]          # one more: is the character after the cut a boundary?
    ends = [m.start() + 1 for m in _CLAUSE.finditer(head) if m.start() + 1 <= room]
    at = ends[-1] if ends and ends[-1] >= room // 2 else \
        next((i for i in range(room, 0, -1) if text[i].isspace()), 0) or \
        next((i for i in range(room, 0, -1) if not (_word(text[i - 1]) and _word(text[i]))), 0)
    kept = text[:at].rstrip(" \t\n,;:")
    return kept + CUT if kept else CUT.strip()


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"
