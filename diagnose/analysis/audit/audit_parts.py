"""Audit rule edit-parts: an edit is credited with what it removed. Pure: each finding is (rule, claim, missing),
which audit.py reports with the others.

A toggle that cuts a loop's count (`range(_warmup_steps(x))` -> `range(1)`) also takes away the call that worked
the count out (effect_parts.py). Which of the two mattered is shown only by a run that cut the count and still made
the call:

  edit-parts  a cause credited on a run whose edit of a loop's count also took away a call in it needs a run of the
              same probe that cut that count with the call kept. Where that run got past the failure, the count
              alone is enough; where it still failed, the cause names the call, never the count; where no such run
              decided (none ran, or it said nothing), the cause says that one edit took away two things, names the
              call, and is not "high"
"""
from __future__ import annotations

from diagnose.analysis.audit.claims import cause_key
from diagnose.analysis.effects.effect_parts import apart, taken_calls
from diagnose.analysis.verdict.comparison import compare
from diagnose.session import Role, Session
from diagnose.status import Compared

RULES = ("edit-parts",)


def parts(s: Session) -> list[tuple[str, str, str]]:
    from probes import door
    out, base = [], s.baseline
    for c in s.causes if base is not None else []:
        if str(c.kind) != "mechanism" or not c.changes_outcome:
            continue
        lead = next((r for r in (s.run(x) for x in c.evidence) if r is not None and r.role == Role.SINGLE
                     and r.probe in c.suspects and compare(s, base, r) == Compared.FIXED), None)
        for line, call in taken_calls(s, base, lead) if lead is not None else []:
            named = f"`{call['text']}`" in c.narrative
            count = door.info(lead.probe).describe if door.known(lead.probe) else lead.probe
            credits_count = c.narrative.lower().startswith(count.lower())
            runs = apart(s, base, lead.probe, line, call)
            took = f"{lead.id} ({lead.toggle}) took away the call `{call['text']}` at L{line} with the count"
            if not runs and (not named or "two things" not in c.narrative or credits_count
                             or str(c.confidence) == "high"):
                out.append(("edit-parts", cause_key(c), f"{took}, no run kept one without the other, and the cause "
                                                        f"does not say that one edit took away two things (or says "
                                                        f"it with confidence high)"))
            elif runs and all(v != Compared.FIXED for _, v in runs) and (not named or credits_count):
                r, v = runs[0]
                out.append(("edit-parts", cause_key(c), f"{took}; {r.id} ({r.toggle}) cut the count and kept the call, "
                                                        f"and still failed ({v}): the call, not {count}, is what "
                                                        f"mattered, and the cause does not name it"))
    return out
