"""The verified fix, chosen among the variants that passed every stage the baseline ran: by steady state (ties
go to the toggle that names the mechanism), else the top cause's own toggle; the order in which the variants still
running would be chosen (`contenders`: the engine runs the leading one's stages first, and an alternative's stages
after its steady state only where the choice reaches it); and which runs a conclusion rests on that still need a
solo confirmation. Pure.
"""

from __future__ import annotations

import math

from diagnose.analysis.verdict import carried, evidence
from diagnose.analysis.verdict.comparison import passed_all, toggle_rank
from diagnose.analysis.verdict.evidence import effective
from diagnose.facts.measures import STEADY_STAGE, geomean, steady_us
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


# An alternative whose stages after its steady state were not run: the fix chosen before it left them nothing to decide
NOT_NEEDED = "not run: the fix was chosen before this variant, which could not change that choice"


def _eligible(session: Session, base: Run, r: Run) -> Run | None:
    """The record that stands for variant `r` (evidence.decider), where `r` may be a fix: everything but its
    stages' count and statuses, which the callers judge."""
    if r.role not in (Role.SINGLE, Role.COMBINATION) or not r.variant or r.switches.get("warm_cache") \
            or r.exercised is False or (door.known(r.probe) and not door.info(r.probe).fixes):
        return None
    d = evidence.decider(session, r)
    ok = not carried.outside_reads(d) and not evidence.thin(session, r) and not evidence.unjudged(session, r)
    return d if ok else None


def _passed(base: Run, d: Run) -> bool:
    return d.outcome == Status.OK and passed_all(base, d)


def _skipped_after_steady(base: Run, d: Run) -> bool:
    """Every stage the baseline was given, passed up to the ones left unrun because the fix was chosen first."""
    unrun = [s.message == NOT_NEEDED for s in d.stages]
    if [s.name for s in d.stages] != [s.name for s in base.stages] or not any(unrun):
        return False
    cut = unrun.index(True)
    return all(s.status == Status.OK if i < cut else s.status == Status.SKIPPED and unrun[i]
               for i, s in enumerate(d.stages))


def _pick(scored: list[tuple[float, Run]]) -> tuple[float, Run]:
    """Within run-to-run noise of the fastest, the fix that names the mechanism wins (it is the one the cause
    points at); beyond it, speed decides. `scored` is sorted by steady state."""
    best_us, best = scored[0]
    near = [(us, r) for us, r in scored if best_us != math.inf and us <= best_us * (1 + FIX_TIE_REL)]
    return max(near, key=lambda x: (_rank(x[1]), -x[0])) if near else (best_us, best)


def _scored(runs: list[Run]) -> list[tuple[float, Run]]:
    return sorted(((geomean(steady_us(r).values()) or math.inf, r) for r in runs), key=lambda x: x[0])


def pick_among(runs: list[Run]) -> tuple[float, Run]:
    """The choice among variants that each passed every stage: (its steady state, it)."""
    return _pick(_scored(runs))


def contenders(session: Session, base: Run) -> list[Run] | None:
    """The variants that may still become the fix (past the baseline's failure, every stage they ran passed), in
    the order the choice would take them: once each has its steady state, as choose_fix ranks them (each one
    the choice if those before it fail); before that, the toggle that names the mechanism first. None where no
    order can be told: a variant that ran its steady-state stage without a steady state (the top cause then
    chooses)."""
    failed = base.failed_stage if base is not None else None
    if failed is None or effective(session, base).outcome == Status.OK:
        return None
    out = []
    for r in session.runs:
        d = _eligible(session, base, r)
        past = d is not None and any(s.name == failed.name and s.status == Status.OK for s in d.stages)
        if past and all(s.status == Status.OK for s in d.stages if s.message != NOT_NEEDED):
            out.append(r)
    timed = [r for r in out if steady_us(r)]
    if any(r.stage(STEADY_STAGE) and r not in timed for r in out):
        return None
    if len(timed) < len(out):
        return sorted(out, key=lambda r: -_rank(r))
    scored, order = _scored(out), []
    while scored:
        pick = _pick(scored)
        order.append(pick[1])
        scored.remove(pick)
    return order


def choose_fix(session: Session, base: Run) -> Fix | None:
    if effective(session, base).outcome == Status.OK:
        return None
    # A fix must have gone through every stage the baseline was given (a run that stopped at the failing
    # stage has not shown that it fits the later budgets), and may not be a doubtful pass.
    # A variant that a solo rerun decided (on a CPU, its time under load: evidence.decider) is that rerun's record.
    eligible = [d for r in session.runs for d in [_eligible(session, base, r)]
                if d is not None and effective(session, r).outcome == Status.OK]
    good = [d for d in eligible if _passed(base, d)]
    if not good:
        return None
    scored = _scored(good)
    best_us, best = _pick(scored)
    if best_us == math.inf:
        # No benchmark ran, so no steady state can choose: the toggle of the top cause's suspect, then the one
        # that names a mechanism, is the fix (compile off also passes a recompile storm, but says nothing).
        top = set(session.causes[0].suspects) if session.causes else set()
        best = max((r for _, r in scored), key=lambda r: (r.probe in top, _rank(r)))
    # the alternatives the choice did not reach: their steady state, and the stages they did not need to run
    unrun = _scored([d for d in eligible if d.outcome == Status.OK and _skipped_after_steady(base, d)])
    seen, costs = set(), []
    for us, r in sorted(scored + unrun, key=lambda x: x[0]):
        if r.source_sha in seen:
            continue
        seen.add(r.source_sha)
        left = [s.name for s in r.stages if s.message == NOT_NEEDED]
        costs.append(FixCost(run=r.id, probe=r.probe, toggle=r.toggle,
                             steady_us=round(us, 2) if us != math.inf else None,
                             per_case_us={k: round(v, 2) for k, v in steady_us(r).items()},
                             delta_us=round(us - best_us, 2) if us != math.inf and best_us != math.inf else None,
                             **({"not_run": left} if left else {})))
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
