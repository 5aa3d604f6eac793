"""How a variant's run compares with the baseline's: where each failed, whether it got further, whether an
edit broke it, the seconds a toggle saved per stage, and how confident runs make a conclusion.

Takes a session and runs; gives facts about them. Pure.
"""
from __future__ import annotations

import statistics

from diagnose.analysis.verdict.evidence import NOISE_ABS, NOISE_REL, decider, effective, judged_seconds, thin, unjudged
from diagnose.facts.measures import stage_seconds
from diagnose.session import Role, Run, Session
from diagnose.status import FAILURES, NO_EVIDENCE, Compared, Confidence, PlanState, Status
from probes import door

WORDS = {Status.CRASH: "the crash", Status.TIMEOUT: "the timeout", Status.WRONG: "the wrong result",
         Status.AT_RISK: "the budget risk", Status.TAMPERED: "the tampering"}


BROKEN_TYPES = ("NameError", "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError",
                "UnboundLocalError", "AttributeError")


def _same_variant(session: Session, run: Run) -> list[Run]:
    return [r for r in session.runs if r.source_sha == run.source_sha and r.role in (run.role, Role.REPEAT)
            and r.switches.get("warm_cache") == run.switches.get("warm_cache") and r.outcome not in NO_EVIDENCE]


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) if len(values) > 1 else 0.0


def seconds_saved(session: Session, base: Run, run: Run) -> dict[str, dict]:
    """Per stage: median seconds saved, the noise it must beat, and the budget; only stages both ran."""
    out = {}
    bases, variants = _same_variant(session, base), _same_variant(session, run)
    for st in run.stages:
        b = base.stage(st.name)
        if not b or b.status in (Status.SKIPPED,) + NO_EVIDENCE or st.status in (Status.SKIPPED,) + NO_EVIDENCE:
            continue
        bv = [x for x in (stage_seconds(r).get(st.name) for r in bases) if x is not None]
        vv = [x for x in (stage_seconds(r).get(st.name) for r in variants) if x is not None]
        if not bv or not vv:
            continue
        saved = statistics.median(bv) - statistics.median(vv)
        noise = max(_spread(bv) + _spread(vv), NOISE_REL * statistics.median(bv), NOISE_ABS)
        out[st.name] = {"saved_s": round(saved, 3), "noise_s": round(noise, 3), "budget_s": st.budget_s,
                        "claimed": abs(saved) > noise, "samples": [len(bv), len(vv)]}
    return out


# Where in a stage's process a failure happened: before the submission ran, in its import, or after it
# (first calls, checks, timing, exit). Deferring import work moves a failure from the second to the third.
_BEFORE_IMPORT = ("torch_import", "device_init", "reference_import")


def _phase_rank(phase: str | None) -> int:
    if phase is None or phase in _BEFORE_IMPORT:
        return 0
    return 1 if phase == "submission_import" else 2


def failure_point(run: Run) -> tuple[int, str, int] | None:
    """(stage index, stage name, phase rank) of the run's failure: the order says which came later."""
    st = run.failed_stage
    if st is None:
        return None
    return [s.name for s in run.stages].index(st.name), st.name, _phase_rank(st.phase)


def is_later(a: tuple, b: tuple) -> bool:
    """Failure point a comes after b: a later stage, or later in the same stage's process."""
    return (a[0], a[2]) > (b[0], b[2])


def _got_past(run: Run, bp: tuple[int, str] | None) -> bool:
    """Did the run finish the stage where the baseline failed (or, for a healthy or at-risk baseline,
    every stage it was given)?"""
    done = {s.name for s in run.stages if s.status in (Status.OK, Status.AT_RISK)}
    if bp is not None:
        return bp[1] in done
    return bool(run.stages) and all(s.status in (Status.OK, Status.AT_RISK) for s in run.stages)


def passed_all(base: Run, run: Run) -> bool:
    """The run went through every stage the baseline was given, and passed each one."""
    return [s.name for s in run.stages] == [s.name for s in base.stages] and \
        all(s.status == Status.OK for s in run.stages)


def broken_by_edit(run: Run) -> str | None:
    """The variant failed because the edit broke the program: an error type an edit makes, raised at an
    edited line or before the code could run. Returns the error, or None."""
    st = run.failed_stage
    if not st or st.status != Status.CRASH or not st.exception:
        return None
    typ = st.exception.get("type") or ""
    if typ not in BROKEN_TYPES:
        return None
    at_edit = bool(st.site and st.site.get("line") in set(run.watched))
    return f"{typ} at line {st.site['line']}" if at_edit else (st.message if st.message.startswith(typ) else
                                                                f"{typ}: {st.message}")


def predicted_over(run: Run):
    """The run's first at-risk stage whose judged time (its prediction, on a GPU) is past its budget, or None."""
    return next((st for st in run.stages if st.status == Status.AT_RISK and st.budget_s
                 and judged_seconds(st) > st.budget_s), None)


def compare(session: Session, base: Run, run: Run) -> Compared:
    """'same' failure as the baseline, 'fixed', 'moved' (the same kind of failure at a later stage),
    'different' (failed otherwise), 'broken' (the edit broke the program), or 'unknown' (it says
    nothing: not run, interrupted, flaky, never exercised). For a probe whose toggle moves work, a moved
    failure is the same failure."""
    e, b = effective(session, run), effective(session, base)
    if e.outcome in NO_EVIDENCE or b.outcome in NO_EVIDENCE or e.flaky:
        return Compared.UNKNOWN
    if run.exercised is False:
        return Compared.UNKNOWN
    bp, rp = failure_point(base), failure_point(run)
    over = predicted_over(run) if e.outcome == Status.AT_RISK and b.outcome == Status.TIMEOUT else None
    if over is not None and bp is not None:
        # at risk with a prediction past the budget is the baseline's timeout by measure, not a fix of it: the same
        # failure where the baseline timed out, a later one where it got past that stage
        order = [st.name for st in run.stages]
        at, there = order.index(over.name), order.index(bp[1]) if bp[1] in order else bp[0]
        if at == there:
            return Compared.SAME
        return Compared.DIFFERENT if at < there else (
            Compared.SAME if door.known(run.probe) and door.info(run.probe).moves_work else Compared.MOVED)
    if rp is None and not _got_past(run, bp):     # not failed yet is not fixed: it must have got there
        return Compared.UNKNOWN
    if e.outcome in FAILURES:
        base_err = (base.failed_stage.exception or {}).get("type") if base.failed_stage else None
        err = (run.failed_stage.exception or {}).get("type") if run.failed_stage else None
        if broken_by_edit(run) and err != base_err:
            return Compared.BROKEN
        if b.outcome == e.outcome and bp and rp and (bp[1], bp[2]) == (rp[1], rp[2]):
            return Compared.SAME
        if bp is None or rp is None or not is_later(rp, bp):
            return Compared.DIFFERENT
        if e.outcome == b.outcome:     # the same kind of failure, later
            return Compared.SAME if door.known(run.probe) and door.info(run.probe).moves_work else Compared.MOVED
        return Compared.FIXED     # it got past the baseline's failure and failed later, on something else
    if e.outcome == Status.OK and b.outcome in FAILURES + (Status.AT_RISK,) and (
            thin(session, run) or unjudged(session, run)):
        # a pass inside the noise of its budget: at risk, not a fix; or one that looks so beside other runs on its
        # GPU, not a fix until a solo rerun says otherwise
        return Compared.THIN
    if b.outcome == Status.AT_RISK:
        return Compared.FIXED if e.outcome == Status.OK else Compared.SAME
    return Compared.FIXED if b.outcome in FAILURES else Compared.SAME


def single_runs(session: Session) -> list[Run]:
    """Single toggles of the probes that, on the baseline's evidence, had a suspect to toggle."""
    active = {p["name"] for p in session.probes if p["state"] == PlanState.RUN} if session.probes else set(door.names())
    # a toggle's run that its solo rerun decided (on a CPU, its time under load) is that rerun's record
    return [decider(session, r) for r in session.runs
            if r.role == Role.SINGLE and door.known(r.probe) and r.probe in active]


def toggle_rank(t) -> int:
    """How specific a toggle (or a run of one) is: its probe's rank for the fragment its label holds."""
    ranks = door.info(t.probe).ranks
    frag = next((f for f in ranks if f in (getattr(t, "toggle", None) or getattr(t, "label", "") or "")), None)
    return ranks[frag] if frag else 1


def probe_site(session: Session, probe: str) -> dict | None:
    kinds = door.info(probe).sites
    hit = next((s for s in session.scan if s["suspect"] in kinds), None)
    return {"file": session.submission.get("path"), "line": hit["line"], "code": hit["code"]} if hit else None


def confidence_of(session: Session, runs: list[Run]) -> tuple[Confidence, bool]:
    effs = [effective(session, r) for r in runs]
    confirmed = all(e.confirmed for e in effs)
    if any(e.flaky for e in effs):
        return Confidence.LOW, False
    return (Confidence.HIGH if confirmed else Confidence.MEDIUM), confirmed
