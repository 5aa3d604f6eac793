"""The verified fix, chosen among the variants that passed every stage the baseline ran: by steady state (ties
go to the toggle that names the mechanism), else the top cause's own toggle; and which runs a conclusion
rests on that still need a solo confirmation. Pure.
"""

from __future__ import annotations

import math

from diagnose.analysis.verdict import carried, evidence
from diagnose.analysis.verdict.comparison import passed_all, toggle_rank
from diagnose.analysis.verdict.evidence import effective
from diagnose.facts.measures import geomean, steady_us
from diagnose.findings import Fix, FixCost
from diagnose.session import Role, Run, Session
from diagnose.status import Status
from probes import door

# Two H100 runs of one Round 9 variant differed by up to 1.7 % in steady state (92.5 and 94.1 µs per call)
FIX_TIE_REL = 0.02


def _rank(r: Run) -> int:
    """A single toggle by how specific it is; of the combinations, the one verified as a fix (its label names
    each edit) above a bisector's test that happened to pass every stage."""
    if door.known(r.probe):
        return toggle_rank(r)
    return 1 if (r.toggle or "").startswith("together: ") else 0


def choose_fix(session: Session, base: Run) -> Fix | None:
    if effective(session, base).outcome == Status.OK:
        return None
    # A fix must have gone through every stage the baseline was given (a run that stopped at the failing
    # stage has not shown that it fits the later budgets), and may not be a doubtful pass.
    # A variant that a solo rerun decided (on a CPU, its time under load: evidence.decider) is that rerun's record.
    good = [d for r in session.runs if r.role in (Role.SINGLE, Role.COMBINATION) and r.variant
            for d in [evidence.decider(session, r)]
            if d.outcome == Status.OK and not r.switches.get("warm_cache") and r.exercised is not False
            and (not door.known(r.probe) or door.info(r.probe).fixes)
            and passed_all(base, d) and not carried.outside_reads(d)
            and effective(session, r).outcome == Status.OK and not evidence.thin(session, r)
            and not evidence.unjudged(session, r)]
    if not good:
        return None
    scored = sorted(((geomean(steady_us(r).values()) or math.inf, r) for r in good), key=lambda x: x[0])
    best_us, best = scored[0]
    # Within run-to-run noise of the fastest, the fix that names the mechanism wins (it is the one the cause
    # points at); beyond it, speed decides.
    near = [(us, r) for us, r in scored if best_us != math.inf and us <= best_us * (1 + FIX_TIE_REL)]
    if near:
        best_us, best = max(near, key=lambda x: (_rank(x[1]), -x[0]))
    elif best_us == math.inf:
        # No benchmark ran, so no steady state can choose: the toggle of the top cause's suspect, then the one
        # that names a mechanism, is the fix (compile off also passes a recompile storm, but says nothing).
        top = set(session.causes[0].suspects) if session.causes else set()
        best = max((r for _, r in scored), key=lambda r: (r.probe in top, _rank(r)))
    seen, costs = set(), []
    for us, r in scored:
        if r.source_sha in seen:
            continue
        seen.add(r.source_sha)
        costs.append(FixCost(run=r.id, probe=r.probe, toggle=r.toggle,
                             steady_us=round(us, 2) if us != math.inf else None,
                             per_case_us={k: round(v, 2) for k, v in steady_us(r).items()},
                             delta_us=round(us - best_us, 2) if us != math.inf and best_us != math.inf else None))
    return Fix(diff=best.variant, steady_us=round(best_us, 2) if best_us != math.inf else None, run=best.id,
               toggle=best.toggle, probe=best.probe, costs=costs)


def doubtful_evidence(session: Session) -> list[Run]:
    """Runs that the verdict, a cause or the fix rests on and that need a solo rerun to be trusted, and runs
    whose timing judgment a statement defers until a solo rerun measures it (evidence.WAITS). Suspects cleared
    on doubtful runs are not rerun (that could cost a full budget each): they are reported as unconfirmed
    instead."""
    ids = [session.verdict.runs[0]] if session.verdict.runs else []
    base = session.baseline
    if base is not None:
        ids.append(base.id)
    for c in session.causes:
        ids += c.evidence
    if session.fix:
        ids.append(session.fix.run)
    out, seen = [], set()
    for rid in ids:
        r = session.run(rid)
        if r is None or rid in seen or r.role == Role.CONFIRM:
            continue
        seen.add(rid)
        if evidence.run_doubt(r) and not evidence.confirmations(session, r):
            out.append(r)
    listed = {r.id for r in out}
    return out + [r for r in _deferred(session) if r.id not in listed and not evidence.confirmations(session, r)]


def _deferred(session: Session) -> list[Run]:
    """The runs behind a statement that says a timing judgment waits for a solo rerun, whose stages need one."""
    said = [(session.verdict.message, session.verdict.runs)] + [(c.narrative, c.evidence) for c in session.causes]
    said += [(i.reason, i.evidence) for i in session.inconclusive]
    ids = dict.fromkeys(rid for text, runs in said if evidence.WAITS in text for rid in runs)
    # a variant that passed but whose pass is judged by a time measured beside others on its GPU (over or within
    # the noise of its budget) would be a fix or not by that judgment alone: it waits for a solo rerun too
    # (on a CPU, a variant's timeout that other work took time from, too: alone it may pass)
    ids.update(dict.fromkeys(r.id for r in session.runs if r.role in (Role.SINGLE, Role.COMBINATION)
                             and (r.outcome == Status.OK or evidence.on_cpu(r))))
    runs = [session.run(rid) for rid in ids]
    return [r for r in runs if r is not None and r.role != Role.CONFIRM and any(map(evidence.needs_solo, r.stages))]
