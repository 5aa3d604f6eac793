"""Which suspects are verified not to be the cause, and why the others are not. Pure.

"Not the cause" needs three things, each measured, never assumed from a toggle's label:
- the baseline reached the suspect's work (effects.py: the time in its statements, its compile calls, captures,
  the libraries' records);
- a run took that work away: not a variant identical to the submission, not one where the work only moved (work
  deferred into the first call ran there), not one where the edit missed and the work ran unchanged;
- that run failed the same way as the baseline, at the same point: the same stage, the same part of the process,
  the same submission lines on the failing stack.
A suspect short of any of these is inconclusive, with the reason: not reached, only moved, ran unchanged,
identical, or failed elsewhere.
"""
from __future__ import annotations

from diagnose.analysis.effects.effects import effect, same_place
from diagnose.analysis.verdict.carried import depends_on_machine
from diagnose.analysis.verdict.comparison import failure_point, is_later
from diagnose.analysis.verdict.evidence import effective
from diagnose.findings import Cleared, Inconclusive
from diagnose.session import Run, Session
from diagnose.status import Compared
from probes import door


def _leave(session: Session, probe: str, evidence: list[str], reason: str) -> None:
    """The suspect is inconclusive for this reason (the one reason that stands for it)."""
    session.inconclusive = [i for i in session.inconclusive if i.probe != probe] + [
        Inconclusive(probe=probe, reason=reason, evidence=evidence)]


def acted(session: Session, base: Run, runs: list[Run]) -> tuple[list[Run], list[str], list[str]]:
    """The runs among these that took the suspect's work away and failed at the baseline's own place, with what
    each took away; and, for the others, why each cannot stand for 'without the suspect'."""
    good, what, why = [], [], []
    for r in runs:
        e = effect(session, base, r)
        elsewhere = same_place(session, base, r)
        if not e.acted:
            why.append(f"{r.toggle} ({r.id}): {e.why_not()}")
        elif elsewhere:
            why.append(f"{r.toggle}: {elsewhere}")
        else:
            good.append(r)
            what.append(e.what)
    return good, what, why


def _why_not_cleared(session: Session, base: Run, probe: str, used: list[Run]) -> str | None:
    """The reason the runs cannot clear this suspect, before any effect is measured; None when they may."""
    info = door.info(probe)
    toggles = ", ".join(r.toggle for r in used)
    machine = next((m for m in map(depends_on_machine, used + [base]) if m), "")
    if machine:     # the same outcome here may come from this machine's state: it clears nothing
        return (f"{toggles}: the runs depend on {machine}, read from outside their containers, so 'still the same' "
                f"proves nothing about the harness's runs")
    if info.seen is not None and not info.seen(base):
        return (f"{toggles}: {base.id} failed before it showed {info.describe} at all, so the toggle had nothing to "
                f"remove; this says nothing about it")
    bp = failure_point(base)
    moved = [r for r in used if bp and failure_point(r) and is_later(failure_point(r), bp)]
    if moved and info.moves_work:
        # the failure came back later, where the moved work now runs: that work is part of it, and moving it is no
        # fix; neither cleared nor a cause of its own
        r = moved[0]
        return (f"{r.toggle}: {r.id} then failed the same way later, in {r.failed_stage.name}/"
                f"{r.failed_stage.phase}, where the moved work ran: moving it is no fix, and it does not clear "
                f"{info.describe}")
    return None


def cleared(session: Session, base: Run, singles: list[Run], verdicts: dict, blamed: set,
            failing: bool) -> list[Cleared]:
    out = []
    if not failing:
        return out
    for probe in sorted({r.probe for r in singles} - blamed, key=door.names().index):
        runs = [r for r in singles if r.probe == probe]
        used = [r for r in runs if verdicts[r.id] == Compared.SAME]
        if not used or any(verdicts[r.id] in (Compared.FIXED, Compared.DIFFERENT, Compared.THIN) for r in runs):
            continue
        ids = [base.id] + [r.id for r in used]
        why = _why_not_cleared(session, base, probe, used)
        if why:
            _leave(session, probe, ids, why)
            continue
        good, whats, why_not = acted(session, base, used)
        if not good:
            _leave(session, probe, ids, "; ".join(why_not) + f": nothing shows {door.info(probe).describe} is "
                                                              f"not the cause")
            continue
        conf = all(effective(session, r).confirmed for r in good + [base])
        skipped = [r.toggle for r in runs if r not in good]
        measured = "; ".join(whats)
        note = f" ({'; '.join(why_not) or ', '.join(skipped) + ' tested nothing: see inconclusive'})" if skipped else ""
        out.append(Cleared(probe=probe, toggles=[r.toggle for r in good], outcome=effective(session, base).outcome,
                           narrative=f"{', '.join(r.toggle for r in good)}: took it away ({measured}) and still "
                                     f"{base.outcome} at the same place — {door.info(probe).describe} is not the "
                                     f"cause{note}.",
                           evidence=[base.id] + [r.id for r in good], confirmed=conf))
        session.inconclusive = [i for i in session.inconclusive if i.probe != probe]
    return out
