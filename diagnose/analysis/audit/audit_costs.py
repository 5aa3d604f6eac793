"""Audit rules about the fix's alternatives. Pure: each finding is (rule, claim, missing), which audit.py reports
with the others.

  cost-measured  a fix's steady-state cost comes from timed benchmark cases of its own run
  chosen-before  an alternative whose later stages were not run (the engine runs them only where the choice could
                 reach it) passed every stage it ran, has its steady state, and, counted as if it had passed the
                 rest too, still loses the choice to the fix: the stages it did not run could not have changed it
"""
from __future__ import annotations

from diagnose.analysis.causes import fix_choice
from diagnose.facts.measures import steady_us
from diagnose.session import Session
from diagnose.status import Status

RULES = ("cost-measured", "chosen-before")


def costs(s: Session) -> list[tuple[str, str, str]]:
    if s.fix is None:
        return []
    out = [("cost-measured", f"cost of {c.probe}: {c.toggle}", f"{c.run} timed no benchmark case")
           for c in s.fix.costs if c.steady_us is not None and not (s.run(c.run) and steady_us(s.run(c.run)))]
    unrun = [c for c in s.fix.costs if c.not_run]
    if not unrun:
        return out
    passed = [r for c in s.fix.costs if not c.not_run for r in [s.run(c.run)] if r is not None]
    for c in unrun:
        key, r = f"cost of {c.probe}: {c.toggle}", s.run(c.run)
        ran = [st for st in r.stages if st.name not in c.not_run] if r is not None else []
        if r is None or not steady_us(r) or any(st.status != Status.OK for st in ran) or any(
                st.status != Status.SKIPPED or st.message != fix_choice.NOT_NEEDED
                for st in r.stages if st.name in c.not_run):
            out.append(("chosen-before", key, f"{c.run} did not pass every stage it ran with a steady state, or "
                                              f"ran the stages said not run"))
            continue
        # the choice made again with this alternative counted as a pass of every stage: the fix must still win
        _, won = fix_choice.pick_among(passed + [r])
        if won.id != s.fix.run:
            out.append(("chosen-before", key, f"had {c.run} passed the stages it did not run, the choice would be "
                                              f"{won.id}, not the fix {s.fix.run}"))
    return out
