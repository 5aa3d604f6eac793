"""Pure functions that derive the numbers a report shows from a run's raw record.

Nothing here measures; everything is computed from phases, compile records and timing samples.
"""
from __future__ import annotations

from diagnose.analysis.verdict import carried, evidence, started
from diagnose.facts import measures
from diagnose.facts.measures import geomean, recompiles, steady_us
from diagnose.findings import Verdict
from diagnose.runs.harness import RUNNER_ALLOWANCE, WIDE_MARGIN
from diagnose.session import Role, Run, StageResult
from diagnose.status import Status
from probes import door


def compile_split(records: list[dict]) -> dict[str, float]:
    """Seconds by compiler layer. torch reports nested cumulative times (dynamo contains aot_autograd
    contains inductor), so each layer is its total minus the one inside it."""
    tot = {"dynamo": 0.0, "aot_autograd": 0.0, "inductor": 0.0, "triton": 0.0, "tuning": 0.0,
           "cudagraphs": 0.0, "total": 0.0}
    for r in records:
        g = lambda k, r=r: (r.get(k) or 0) / 1e6  # noqa: E731
        dyn, aot, ind = g("dynamo_cum_us"), g("aot_cum_us"), g("inductor_cum_us")
        tri, tune = g("triton_us"), g("autotune_us") + g("runtime_autotune_us")
        tot["dynamo"] += max(0.0, dyn - aot) if aot else dyn
        tot["aot_autograd"] += max(0.0, aot - ind)
        tot["inductor"] += max(0.0, ind - tri - g("autotune_us"))
        tot["triton"] += tri
        tot["tuning"] += tune     # Inductor's autotuning, shown as the compile table's "autotune" column
        tot["cudagraphs"] += g("cudagraphify_us")
        tot["total"] += g("duration_us") or dyn
    return {k: round(v, 3) for k, v in tot.items()}


def probe_spans(st: StageResult, own: bool = False) -> list[dict]:
    """The spans of the probes' suspects' work in one stage (each probe's `spans` hook, in the registry's order);
    with `own`, only the suspect's own work (a capture the submission made, not one its compiler made)."""
    return [sp for sps in door.call("spans", step=st) for sp in sps if sp["own"] or not own]


def first_call(st: StageResult) -> dict | None:
    """The stage's first call, split into compiling, the probes' own work in it (capturing) and the rest."""
    return measures.first_call(st, probe_spans(st, own=True))


def run_row(run: Run) -> dict:
    """One row of the evidence table: where a run's seconds went, from its earliest stages."""
    stages = [s for s in run.stages if s.status != "skipped"]
    imp = next((s.phase_s("submission_import") for s in stages if s.name != "compile"
                and any(p.name == "submission_import" for p in s.phases)), None)
    if imp is None and stages:
        imp = stages[0].phase_s("submission_import")
    comp = [r for s in stages for r in s.compile]
    fc = next((first_call(s) for s in stages if first_call(s)), None)
    caps = [c for s in stages for c in probe_spans(s, own=True)]
    cap_s = sum((c["end_s"] or c["start_s"]) - c["start_s"] for c in caps)
    steady = steady_us(run)
    worst = None
    for s in stages:
        sec = s.seconds
        if s.budget_s and (worst is None or sec / s.budget_s > worst[0] / worst[1]):
            worst = (sec, s.budget_s, s.name)
    return {"import_s": imp, "compile_s": compile_split(comp)["total"] if comp else 0.0,
            "first_call": fc, "capture_s": round(cap_s, 3), "steady_us": geomean(steady.values()),
            "per_case_us": steady, "worst_stage": worst, "recompiles": sum(len(recompiles(s)) for s in stages)}


def margin_need(st, seconds: float) -> float:
    """A stage's time as check's margin rule counts it: the top of its predicted 95 % range where its timing
    loops were sampled (the measured spread), else its time; then the allowance for a slower or busier runner."""
    hi = (st.predicted_range or [None, None])[1] or seconds
    return max(hi, seconds) * (1 + RUNNER_ALLOWANCE)


def wide(need: float, budget: float) -> bool:
    """A wide margin: the stage's time, with spread and allowance, under WIDE_MARGIN of its budget."""
    return need <= WIDE_MARGIN * budget


def margins(run: Run) -> list[dict]:
    out = []
    for s in run.stages:
        if s.status in (Status.SKIPPED, Status.NEEDS_GPU, Status.INTERRUPTED):
            continue
        out.append({"stage": s.name, "seconds": round(s.seconds, 2), "budget_s": s.budget_s,
                    "margin_s": round(s.budget_s - s.seconds, 2), "measured_s": s.charged_s,
                    "lock_wait_s": s.lock_wait_s,
                    # a timeout's figure is the time it ran out, never a prediction (session.StageResult.seconds)
                    "predicted": s.predicted_s is not None and bool(s.timing) and s.status != Status.TIMEOUT,
                    "status": s.status})
    return out


def verdict(session, interrupted: bool = False) -> Verdict:
    """The session's verdict: the baseline run's outcome (as its evidence supports it), where it
    happened, and the submission line."""
    ref = next((r for r in session.runs if r.role == Role.REFERENCE), None)
    if ref is not None and ref.outcome != Status.OK and session.verdict.stage == "reference":
        return session.verdict       # the problem's reference could not run here: that is the verdict
    base = session.baseline
    # a stage the user stopped never passed, whatever the run's own outcome says
    stopped = base is not None and (base.outcome == Status.INTERRUPTED or
                                    any(x.status == Status.INTERRUPTED for x in base.stages))
    if base is None or not base.stages or stopped:
        status = Status.INTERRUPTED if interrupted or stopped else Status.INCOMPLETE
        return Verdict(status, message="interrupted before the submission's run finished" if status ==
                       Status.INTERRUPTED else "no run finished", runs=[base.id] if base else [])
    st = base.failed_stage or next((s for s in base.stages if s.status == Status.AT_RISK), None)
    if base.outcome == Status.NEEDS_GPU:
        return Verdict(Status.NEEDS_GPU, stage=st.name, phase=st.phase, message=st.message, runs=[base.id],
                       note="this machine cannot judge the submission: run it where the problem's GPU is")
    never = started.unstarted(base)
    if never:       # no code of the submission ran: what ended it is this machine's or ours (started.py)
        return Verdict(Status.INCOMPLETE, stage=st.name, phase=st.phase, runs=[base.id], confirmed=False,
                       message=f"inconclusive: {base.id} never reached the submission: {never}; that says nothing "
                               f"about the submission (a fault of this machine or of diagnose)")
    eff = evidence.effective(session, base)
    if eff.flaky and eff.outcome == Status.OK:
        missing = _not_rerun(session, base)
        if missing:     # alone it got further, but not to the end: that is no pass
            return Verdict(Status.INCOMPLETE, stage=st.name if st else None,
                           message=f"inconclusive: {base.outcome} beside other runs, but its solo rerun "
                                   f"never ran {', '.join(missing)}", runs=[base.id], confirmed=False, note=eff.note)
    if eff.flaky:     # the solo rerun ended otherwise: that is what the harness, running alone, would see
        alone = evidence.solo_reruns(session, base)[-1]
        if alone.failed_stage is not None:     # it failed elsewhere: say where, from the solo rerun itself
            return _failure_verdict(session, alone, alone.failed_stage, runs=[base.id, alone.id],
                                    confirmed=False, note=eff.note)
        # a pass rests on the run that passed: the baseline's own stages never finished
        return Verdict(eff.outcome, message=f"{base.outcome} beside other runs, {eff.outcome} when run alone",
                       runs=[base.id, alone.id], confirmed=False, note=eff.note)
    unsure = [x for x in base.stages if x.status == Status.OK and x.message.startswith("inconclusive:")]
    if st is None and unsure:
        return Verdict(Status.INCOMPLETE, stage=unsure[0].name, message=unsure[0].message, runs=[base.id],
                       confirmed=False, note="a prediction from a short sample cannot place the stage on either side "
                                             "of its budget; --full runs every repeat")
    machine = carried.depends_on_machine(base)
    if st is None and machine:
        # the harness's container has none of it: a pass that read it says nothing about the harness's pass
        return Verdict(Status.INCOMPLETE, message=f"inconclusive: depends on {machine}: {base.id} passed, but it "
                                                  f"read that from outside its container, where the harness's "
                                                  f"container has nothing", runs=[base.id], confirmed=False,
                       note="remove the dependence (a path on this machine, a cache outside the container) and "
                            "run it again")
    if st is None:
        msg = ("every stage passed its checks; on this CPU their times are shown, not judged against the budget"
               if session.harness.get("cpu_only") else "every stage passed within its budget")
        return Verdict(Status.OK, message=msg, runs=[base.id],
                       confirmed=eff.confirmed, note=eff.note)
    if st.status == Status.AT_RISK:
        return _at_risk(session, base, st, eff)
    return _failure_verdict(session, base, st, runs=[base.id], confirmed=eff.confirmed, note=eff.note)


def _at_risk(session, base: Run, st: StageResult, eff) -> Verdict:
    """At risk is a timing judgment: stated from the stage measured alone on its GPU (the baseline's own, else its
    solo rerun's, which the verdict then names); with neither, how many runs shared the GPU, and that it waits."""
    got = evidence.alone(session, base, st.name)
    if got is None:
        return Verdict(Status.INCOMPLETE, stage=st.name, message=f"inconclusive: {evidence.unjudged(session, base)}",
                       runs=[base.id], confirmed=False)
    run, alone = got
    return _failure_verdict(session, run, alone, runs=[base.id] if run is base else [base.id, run.id],
                            confirmed=eff.confirmed, note=eff.note)


def wrong_by(st: StageResult) -> str:
    """A wrong output in numbers, as each probe that compared it with the reference's own says it (`wrong_by`)."""
    return "; ".join(filter(None, door.call("wrong_by", step=st)))


def _failure_verdict(session, run: Run, st: StageResult, **kw) -> Verdict:
    if st.status == Status.WRONG and wrong_by(st):
        kw["note"] = "; ".join(filter(None, [kw.get("note"), wrong_by(st)]))
    site = None
    if st.site:
        site = {"file": session.submission.get("path"), "line": st.site["line"],
                "code": source_line(session, st.site["line"]), "func": st.site.get("func")}
    return Verdict(run.outcome, stage=st.name, phase=st.phase, message=st.message, site=site, **kw)


def _not_rerun(session, base: Run) -> list[str]:
    """The harness stages that neither the baseline nor its last solo rerun measured."""
    solo = evidence.solo_reruns(session, base)
    ran = {s.name for s in solo[-1].stages if s.status != Status.SKIPPED} if solo else set()
    return [n for n in session.harness.get("stages", []) if n not in ran]


def source_line(session, line: int) -> str:
    lines = (session.submission.get("source") or "").splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def overlap(session) -> int:
    """Most runs that were alive at the same moment, from their events' wall-clock times."""
    spans = []
    for run in session.runs:
        ts = [e["t"] for s in run.stages for e in s.events]
        if ts and "identical variant" not in run.note and run.role != Role.CONFIRM:
            spans.append((min(ts), max(ts)))
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    best = cur = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return best
