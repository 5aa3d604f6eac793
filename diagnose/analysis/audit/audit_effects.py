"""Audit rules on what each toggle changed, re-derived from the runs' own records (effects.py measures it), never
from the toggle's label. Pure: each finding is (rule, claim, missing), which audit.py reports with the others.

Rules:
  cleared-effect  "not the cause" needs, in one of its runs, the suspect's work reached by the baseline and taken
                  away by the variant (not identical to the submission, not only moved, not left unchanged), and the
                  variant failing at the baseline's own place (the same submission lines on the failing stack)
  fix-credit      a cause credits a suspect only with runs that took that suspect's work away: a run that changed
                  nothing, or left the work as it was, got past the failure for another reason; and a run that
                  also took other work away (another loop, an import-time self-test) is said to, and not with
                  confidence high
  one-suspect     two probes whose toggles act on one statement are one suspect: never two causes, never an
                  interaction of the two
  fix-margin      a verified fix, and a cause that says "fixes it", never rest on a pass within the noise floor of a
                  budget: that is at risk, not a fix
"""
from __future__ import annotations

from diagnose.analysis.audit.claims import cause_key, cleared_key
from diagnose.analysis.effects.effects import credit, effect, one_suspect, same_place
from diagnose.analysis.verdict.comparison import compare
from diagnose.analysis.verdict.evidence import thin, unjudged
from diagnose.session import Role, Session
from diagnose.status import Compared

RULES = ("cleared-effect", "fix-credit", "one-suspect", "fix-margin")


def _cleared(s: Session) -> list[tuple[str, str, str]]:
    out, base = [], s.baseline
    merged = one_suspect(s, [r for r in s.runs if r.role == Role.SINGLE])
    for c in s.cleared if base is not None else []:
        if c.probe in merged:
            out.append(("one-suspect", cleared_key(c.probe),
                        f"its toggle edits the same statement as {merged[c.probe]}'s: one suspect, not cleared apart"))
        runs = [r for r in (s.run(x) for x in c.evidence) if r is not None and r is not base]
        why = []
        for r in runs:
            e = effect(s, base, r)
            place = same_place(s, base, r)
            if e.acted and not place:
                break
            why.append(f"{r.id}: {e.why_not() if not e.acted else place}")
        else:
            out.append(("cleared-effect", cleared_key(c.probe), "; ".join(why) or "no run took its work away"))
    return out


def _credited(s: Session) -> list[tuple[str, str, str]]:
    out, base = [], s.baseline
    singles = [r for r in s.runs if r.role == Role.SINGLE]
    merged = one_suspect(s, singles)
    for c in s.causes if base is not None else []:
        key = cause_key(c)
        for p in c.suspects:
            if p in merged:
                out.append(("one-suspect", key, f"{p}'s toggle edits the same statement as {merged[p]}'s: one "
                                                f"suspect, named twice"))
        runs = [r for r in (s.run(x) for x in c.evidence) if r is not None and r.role == Role.SINGLE
                and r.probe in c.suspects and compare(s, base, r) in (Compared.FIXED, Compared.THIN)]
        for r in runs:
            why = credit(s, base, r)
            if why:
                out.append(("fix-credit", key, f"{r.id} ({r.toggle}) is credited to {r.probe}, but {why}"))
            beside = effect(s, base, r).outside
            if beside and ("also took away" not in c.narrative or str(c.confidence) == "high"):
                out.append(("fix-credit", key, f"{r.id} ({r.toggle}) also took away {'; '.join(beside)}, and the "
                                               f"cause credits {r.probe} alone"))
            if "fixes it" in c.narrative and thin(s, r) and not any(
                    not thin(s, x) and compare(s, base, x) == Compared.FIXED for x in runs):
                out.append(("fix-margin", key, f"it says 'fixes it' on {r.id}, which {thin(s, r)}"))
    return out


def _fix(s: Session) -> list[tuple[str, str, str]]:
    r = s.run(s.fix.run) if s.fix else None
    if r is None:
        return []
    why = thin(s, r)
    why = f"{why}: at risk, not a fix" if why else unjudged(s, r)
    return [("fix-margin", "fix", f"{r.id} {why}")] if why else []


def effects(s: Session) -> list[tuple[str, str, str]]:
    return _cleared(s) + _credited(s) + _fix(s)
