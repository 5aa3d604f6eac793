"""What a cause says where no single toggle decided it: what the combination runs show, and causes that each
fail the submission on their own; and a toggle that its solo rerun decided. Pure: reads the session's runs, writes
narrative text."""
from __future__ import annotations

from diagnose.analysis.verdict.comparison import compare, single_runs
from diagnose.analysis.verdict.evidence import run_doubt
from diagnose.findings import Cause
from diagnose.session import Role, Run, Session
from diagnose.status import FAILURES, Compared, Status


def each_alone(session: Session, causes: list[Cause]) -> None:
    """Causes that each fail the submission on their own: each says so, and that the fix takes them all away."""
    names = " and ".join(" × ".join(c.suspects) for c in causes)
    gone = [r.id for r in session.runs if r.role == Role.COMBINATION and
            {p for c in causes for p in c.suspects} <= set(r.removed) and r.outcome == Status.OK]
    for c in causes:
        c.narrative += (f" It is one of {len(causes)} causes that each fail it on their own ({names}): taking away one "
                        f"leaves the other, and only a run without all of them passed" +
                        (f" ({', '.join(gone)})." if gone else "."))
        c.evidence += [g for g in gone if g not in c.evidence]


def combination_story(session: Session, base: Run, minimal: list[str], combos: list[Run]) -> str:
    """What the combination runs show, where no single toggle got past the failure: with these suspects kept and
    every other taken away it still fails; without them it passes; and the runs without only one of them that
    still failed (each of the others is enough to fail on its own)."""
    kept = [r for r in combos if not set(minimal) & set(r.removed) and compare(session, base, r) in (
        Compared.SAME, Compared.MOVED)]
    gone = [r for r in combos if set(minimal) <= set(r.removed) and compare(session, base, r) == Compared.FIXED]
    alone = [r for r in single_runs(session) if r.probe in minimal and r.outcome in FAILURES]
    parts = []
    if kept:
        parts.append(f"with only {' and '.join(minimal)} kept it still fails ({', '.join(r.id for r in kept)})")
    if gone:
        parts.append(f"with {' and '.join(minimal)} taken away too it gets past it ({', '.join(r.id for r in gone)})")
    if alone:
        parts.append(f"taking {' or '.join(sorted({r.probe for r in alone}))} away alone is not enough "
                     f"({', '.join(f'{r.id} still {r.outcome}' for r in alone)}): another suspect fails it too")
    return ("The combination runs show it: " + "; ".join(parts) + ".") if parts else \
        "No single run without it got past the failure; only the combination runs decide it."


def decided_alone(session: Session, run: Run) -> str:
    """Where the deciding toggle's run is a solo rerun (on a CPU, its first run's time was taken by other work:
    evidence.decider), why that first run's ending was in doubt, and that the rerun alone decided."""
    first = session.run(run.confirms) if run.role == Role.CONFIRM and run.confirms else None
    doubt = run_doubt(first) if first is not None else None
    return f" {first.id}: {doubt}; its solo rerun {run.id}, with no other run beside it, decided." if doubt else ""
