"""What the search probe says is not there, in what the runs show, and how the audit re-derives it from the same
records (`negatives`, the probe's hook for `diagnose report --audit`): "not present" needs a baseline whose hook
saw no search at any shape's first call; "no place of the module took a value the searches timed" needs a tuning
run where none did; "no function of theirs returned it" one where none returned such a value.
"""
from __future__ import annotations

from diagnose.facts.observed import cut_by
from diagnose.session import Run, Session
from probes.search.evidence import NO_PLACE, NO_RETURN, _facts, linked_places, linked_returns, searches

SCANNED = "no loop times candidates into a module-level dict"


def waits(run: Run | None) -> list[dict]:
    """The clock reads the hook took for waits at the run's first calls (one line read again and again with nothing
    of the submission's between), summed by where they were."""
    out: dict[tuple, int] = {}
    for _, e in _facts(run):
        if e.get("what") == "phase" and str(e.get("phase", "")).startswith("first_call:"):
            for w in e.get("waits") or []:
                out[(w.get("func"), w.get("line"))] = out.get((w.get("func"), w.get("line")), 0) + (w.get("calls") or 0)
    return [{"func": f, "line": ln, "calls": n} for (f, ln), n in out.items()]


def absent_why(run: Run | None) -> str:
    """Why the probe found no search: what the baseline's first calls showed (the reads that were waits named), and
    that the scan found no timed loop storing into a module-level dict."""
    if run is None:
        return f"{SCANNED}, and no run has shown one yet"
    firsts = [p for st in run.stages for p in st.phases if p.name.startswith("first_call:")]
    if not firsts:
        return f"the baseline reached no shape's first call, where a search would show; {SCANNED}"
    said = "; ".join(f"{w['func']}() L{w['line']} read a clock again and again with nothing of the submission's "
                     f"between ({w['calls']} call(s)): a wait" for w in waits(run))
    cut = [(st, p) for st in run.stages for p in st.phases if p.name.startswith("first_call:") and p.open]
    # a first call cut off early may have stopped before its third candidate: said, so nobody reads more into it
    cut_off = f", the last cut off by {cut_by(cut[-1][0])} {cut[-1][1].seconds:.1f} s in" if cut else ""
    return (f"no code of the submission read a clock between candidates in the baseline's {len(firsts)} first "
            f"call(s){cut_off}" + (f" ({said})" if said else "") + f", and {SCANNED}")


def negatives(session: Session, line: dict) -> list[tuple[str, str]]:
    """What the session's records show against the probe's own line ({name, state, why}): (rule, what they show)."""
    out, why = [], line.get("why") or ""
    base = session.baseline
    found = searches(base) if str(line.get("state")) == "not present" else []
    if found:
        r = found[0]
        out.append(("not-present", f"{base.id}'s hook saw a search: {r['func']}() timed {r['candidates']} candidates "
                                   f"at {r['phase']}"))
    tuning = next((r for r in session.runs if str(r.role) == "tuning"), None)
    if NO_PLACE in why and linked_places(tuning):
        out.append(("cannot-pin", f"in {tuning.id}, {', '.join(linked_places(tuning))} took a value the searches "
                                  f"timed"))
    if NO_RETURN in why and linked_returns(tuning):
        r = linked_returns(tuning)[0]
        out.append(("cannot-pin", f"in {tuning.id}, {r['func']}() returned a value the searches timed"))
    return out
