"""The audit: every conclusion of a session checked against the session's own raw runs. Pure.

A session states a verdict, causes, suspects cleared, suspects left inconclusive, and a fix. Each names the
runs behind it. The audit re-derives what those runs can support and names every statement they cannot,
with the rule it breaks and what is missing. `diagnose report SESSION --audit` exits non-zero when one is
found; the test suite audits every session any test writes.

Rules (the ids are stable: they are what a finding is reported under):
  verdict-runs     the verdict's runs exist, and its status is what they ended with
  ok-finished      OK needs every planned stage of the baseline to have finished, none interrupted
  claim-runs       every claim names runs that exist; a cause, a cleared suspect and the fix, runs that ran
  cleared-acted    "not the cause" needs its toggle to have run its edit and the baseline to have shown the
                   mechanism the toggle removes; a failure that only moved later clears nothing
  cleared-blamed   a suspect is never both a cause and cleared
  cleared-site     a cleared suspect's own source lines never hold the verdict's site
  high-confirmed   confidence "high" needs confirmed runs
  fix-passes       a fix's run passed every stage the baseline was given
  fix-cause        without a steady state to choose by, the fix is a toggle of the top cause's suspect when
                   one of those passed
  cpu-not-judged   without a GPU, no stage is at risk from a predicted time
  prediction-range a verdict of OK or AT RISK never rests on a predicted time whose 95 % range crosses the
                   budget
  figure-budget    on a GPU, a stage that passed shows no time over its budget
  cause-fixes      a cause that changes the outcome has, for each of its suspects, a run with that suspect
                   taken away that got past the failure; "fixes it" needs one that passed every stage the
                   baseline ran. Runs that all failed support no such cause
  cause-interaction an interaction has a run that kept all of its suspects and failed as the baseline did
  cause-all-failed "too slow wherever it runs" needs variants, every one of which ended as the baseline did
  cause-unchanged  "the strategies tried did not fix it" needs that no variant got past the failure
  cleared-same     each run behind "not the cause" ended the way the baseline did, at the same point
  figure-equal     a figure a conclusion states (seconds saved, a fix's µs per call) is what its runs give
  outside-state    OK, a verified fix and "not the cause" never rest on a run that read this machine's state
  lost-worker      a timeout because the evaluator's pool worker died needs the built-in evaluator, a phase of
                   its pool worker and a process that died there; a death there is that timeout, not a crash
  no-probe-claims  a session that ran no probe says nothing probes found or cleared, and only such a session says
                   its cause was not looked for; untaken: no cause rests on a toggle whose run shows its work done
  timing-solo      at risk, "needs N× its budget" and a pass within the noise of a budget rest on a stage measured
                   with no other run on its GPU, the run's own or its solo rerun's (audit_runs.py); reached-submission:
                   nothing rests on a run whose worker never reached the submission (audit_runs.py, started.py)
  cleared-effect, fix-credit, one-suspect, fix-margin: what each toggle changed (audit_effects.py); edit-parts: a
  count edit that also took away a call is credited as the runs that took the two apart show (audit_parts.py);
  not-present, cannot-pin, cut-off, mechanism-seen: what a sentence says is not there, or what cut work off, is
  what the records show (audit_negative.py); cost-measured, chosen-before: the fix's alternatives
  (audit_costs.py). Each finding names the claim (claims.py) it is about by its key.
"""
from __future__ import annotations

from dataclasses import dataclass

from diagnose.analysis.audit.audit_costs import RULES as COST_RULES, costs
from diagnose.analysis.audit.audit_effects import RULES as EFFECT_RULES, effects
from diagnose.analysis.audit.audit_negative import RULES as NEGATIVE_RULES, negatives
from diagnose.analysis.audit.audit_parts import RULES as PART_RULES, parts
from diagnose.analysis.audit.audit_probes import no_probe_claims, untaken
from diagnose.analysis.audit.audit_runs import lost_workers, outside, timing_solo, unreached
from diagnose.analysis.audit.claims import Claim, cause_key, cleared_key, derive
from diagnose.analysis.causes.unfixed import variant_runs
from diagnose.analysis.verdict.comparison import compare, passed_all, seconds_saved
from diagnose.facts.measures import geomean, steady_us
from diagnose.session import Role, Run, Session
from diagnose.status import FAILURES, NO_EVIDENCE, Compared, Status

RULES = ("verdict-runs", "ok-finished", "claim-runs", "cleared-acted", "cleared-blamed", "cleared-site",
         "high-confirmed", "fix-passes", "fix-cause", "cpu-not-judged", "prediction-range",
         "figure-budget", "cause-fixes", "cause-interaction", "cause-all-failed",
         "cause-unchanged", "cleared-same", "figure-equal", "outside-state", "reached-submission", "lost-worker",
         "no-probe-claims", "untaken", "timing-solo") + EFFECT_RULES + PART_RULES + NEGATIVE_RULES + COST_RULES
UNCHANGED = ("the strategies tried did not fix it", "no probe toggle and no combination")   # the older wording too


@dataclass(frozen=True)
class Finding:
    rule: str
    claim: str          # the statement, as the report makes it
    missing: str        # what the runs do not show

    def __str__(self) -> str:
        return f"[{self.rule}] {self.claim}: {self.missing}"


def _ran(r: Run | None) -> bool:
    return r is not None and bool(r.stages) and r.outcome not in NO_EVIDENCE


def _verdict(s: Session) -> list[Finding]:
    out, v = [], s.verdict
    if v.status in (Status.INCOMPLETE, Status.INTERRUPTED, Status.NEEDS_GPU):
        return out      # says that nothing can be concluded here, and why
    base = s.baseline
    claim = "verdict"
    if base is None or base.id not in v.runs and not any(s.run(r) for r in v.runs):
        return [Finding("verdict-runs", claim, "no baseline run stands behind it")]
    if v.status == Status.OK:
        planned = list(s.harness.get("stages") or [])
        runs = [s.run(r) for r in v.runs if s.run(r)]
        done = {st.name for r in runs for st in r.stages if st.status in (Status.OK, Status.AT_RISK)}
        missing = [n for n in planned if n not in done]
        if missing or any(st.status == Status.INTERRUPTED for r in runs for st in r.stages):
            out.append(Finding("ok-finished", claim, f"the stages {', '.join(missing) or '(interrupted)'} never "
                                                     f"finished in {', '.join(v.runs)}"))
    elif v.status in FAILURES:
        ended = [st for rid in v.runs if s.run(rid) for st in s.run(rid).stages if st.status == v.status]
        if not ended:
            out.append(Finding("verdict-runs", claim, f"no stage of {', '.join(v.runs)} ended {v.status}"))
    return out


# Claims whose runs must have run and said something; the others (a suspect left inconclusive, a figure a
# probe derives) may rest on runs that said nothing, but those runs must exist.
_MUST_HAVE_RUN = ("cause", "cleared", "fix")


def _claims(s: Session, claims: list[Claim]) -> list[Finding]:
    out = []
    for c in claims:
        for rid in c.runs:
            if c.kind in _MUST_HAVE_RUN and not _ran(s.run(rid)):
                out.append(Finding("claim-runs", c.key, f"its run {rid} is missing or says nothing (not run, "
                                                        f"interrupted)"))
            elif s.run(rid) is None:
                out.append(Finding("claim-runs", c.key, f"its run {rid} does not exist"))
    for c in s.causes:
        if str(c.confidence) == "high" and not c.confirmed:
            out.append(Finding("high-confirmed", cause_key(c), "confidence high, but its runs are unconfirmed"))
    return out


def _cleared(s: Session) -> list[Finding]:
    from probes import door
    out, base = [], s.baseline
    blamed = {p for c in s.causes for p in c.suspects}
    site = (s.verdict.site or {}).get("line")
    kinds_at = {}
    for x in s.scan:
        kinds_at.setdefault(x["suspect"], []).append((x["line"], x.get("end_line", x["line"])))
    for c in s.cleared:
        claim = cleared_key(c.probe)
        if c.probe in blamed:
            out.append(Finding("cleared-blamed", claim, "the same suspect is named as a cause"))
        info = door.info(c.probe) if door.known(c.probe) else None
        if info is not None and info.seen is not None and base is not None and not info.seen(base):
            out.append(Finding("cleared-acted", claim, f"the baseline never showed {info.describe}, so there was "
                                                       f"nothing for the toggle to remove"))
        for rid in c.evidence:
            r = s.run(rid)
            if r is None or r is base:
                continue
            if r.exercised is False:
                out.append(Finding("cleared-acted", claim, f"{rid} never executed its edited lines"))
            if base is not None and info is not None and info.moves_work and r.failed_stage and base.failed_stage:
                from diagnose.analysis.verdict.comparison import failure_point, is_later
                if is_later(failure_point(r), failure_point(base)):
                    out.append(Finding("cleared-acted", claim, f"{rid} failed later, where the moved work ran: "
                                                               f"the work moved, it did not go"))
        if site and info is not None and any(a <= site <= b for k in info.sites for a, b in kinds_at.get(k, [])):
            out.append(Finding("cleared-site", claim, f"the verdict's own line {site} is one of its sites"))
    return out


def _fix(s: Session) -> list[Finding]:
    out, base, f = [], s.baseline, s.fix
    if f is None or base is None:
        return out
    r = s.run(f.run)
    wanted = [st.name for st in base.stages]
    if r is None or [st.name for st in r.stages] != wanted or any(st.status != Status.OK for st in r.stages):
        out.append(Finding("fix-passes", "fix", f"{f.run} did not pass every stage the baseline was "
                                                           f"given ({', '.join(wanted)})"))
    top = s.causes[0] if s.causes else None
    if f.steady_us is None and top and top.suspects and f.probe not in top.suspects:
        rivals = [x.run for x in f.costs if x.probe in top.suspects]
        if rivals:
            out.append(Finding("fix-cause", "fix", f"no steady state chose it, and {rivals[0]}, a "
                                                               f"toggle of the top cause, passed too"))
    return out


def _cpu(s: Session) -> list[Finding]:
    return [Finding("cpu-not-judged", f"{st.name} time" if r is s.baseline else f"{r.id} {st.name} at risk",
                    "a CPU prediction was judged against a budget")
            for r in s.runs for st in r.stages if st.status == Status.AT_RISK and s.harness.get("cpu_only")]


def _predictions(s: Session) -> list[Finding]:
    v, base = s.verdict, s.baseline
    if s.harness.get("cpu_only") or base is None or v.status not in (Status.OK, Status.AT_RISK):
        return []
    return [Finding("prediction-range", "verdict", f"{st.name} was predicted {lo:.0f}–{hi:.0f} s against "
                                                              f"its {st.budget_s:g} s budget")
            for st in base.stages if st.predicted_range and st.status in (Status.OK, Status.AT_RISK)
            for lo, hi in [st.predicted_range] if lo <= st.budget_s < hi]


def _figures(s: Session) -> list[Finding]:
    base = s.baseline
    if s.harness.get("cpu_only") or base is None:
        return []
    return [Finding("figure-budget", f"{st.name} time", f"passed, yet shown at {st.seconds:.1f} s against its "
                                                        f"{st.budget_s:g} s budget")
            for st in base.stages if st.status == Status.OK and st.budget_s and st.seconds > st.budget_s]


def _removes(r: Run, probe: str) -> bool:
    single = r.role in (Role.SINGLE, Role.CONFIRM)     # a toggle's solo rerun decides it on a CPU (evidence.decider)
    return (single and r.probe == probe) or (r.role == Role.COMBINATION and probe in r.removed)


def _outcome_cause(s: Session, c, key: str, base: Run, variants: list[Run]) -> list[Finding]:
    out = []
    for p in c.suspects:
        without = [r for r in variants if _removes(r, p)]
        past = [r for r in without if compare(s, base, r) == Compared.FIXED]
        if not past:
            tried = f"{', '.join(r.id for r in without)} took it away and still failed" if without else \
                "no run took it away"
            out.append(Finding("cause-fixes", key, f"nothing shows that removing {p} gets past the failure: {tried}"))
        elif "fixes it" in c.narrative and not any(passed_all(base, r) for r in past):
            out.append(Finding("cause-fixes", key, f"it says 'fixes it', but no run without {p} "
                                                   f"({', '.join(r.id for r in past)}) passed every stage the "
                                                   f"baseline ran"))
    if len(c.suspects) > 1 and not any(
            r is base or (not any(_removes(r, p) for p in c.suspects)
                          and compare(s, base, r) in (Compared.SAME, Compared.MOVED))
            for r in [base] + variants if r.id in c.evidence):
        out.append(Finding("cause-interaction", key, "no run that kept all of its suspects failed as the baseline "
                                                     "did"))
    return out


def _causes(s: Session) -> list[Finding]:
    """Each cause re-derived from its runs: what it says follows from how they ended."""
    base, out = s.baseline, []
    if base is None:
        return out
    for c in s.causes:
        key = cause_key(c)
        variants = [r for r in (s.run(x) for x in c.evidence) if r is not None and r is not base]
        if c.kind == "mechanism" and c.changes_outcome:
            out += _outcome_cause(s, c, key, base, variants)
        elif c.kind == "too_slow" and (not variants or any(r.outcome != base.outcome for r in variants)):
            other = next((r for r in variants if r.outcome != base.outcome), None)
            out.append(Finding("cause-all-failed", key, f"{other.id} ended {other.outcome}, not {base.outcome}"
                               if other else "no variant ran to show that it fails wherever it runs"))
        elif any(w in c.narrative for w in UNCHANGED):
            got = [r for r in variant_runs(s) if compare(s, base, r) == Compared.FIXED]
            if got:
                out.append(Finding("cause-unchanged", key, f"{got[0].id} ({got[0].toggle or got[0].probe}) got past "
                                                           f"the failure"))
        if c.seconds_saved and not any(seconds_saved(s, base, r) == c.seconds_saved for r in variants):
            out.append(Finding("figure-equal", key, "the seconds saved it states are not what any of its runs give"))
    return out


def _cleared_same(s: Session) -> list[Finding]:
    base, out = s.baseline, []
    for c in s.cleared:
        for r in (s.run(x) for x in c.evidence):
            if r is not None and base is not None and r is not base and compare(s, base, r) != "same":
                out.append(Finding("cleared-same", cleared_key(c.probe), f"{r.id} did not end as the baseline did "
                                                                         f"({r.outcome})"))
    return out


def _fix_figures(s: Session) -> list[Finding]:
    f, out = s.fix, []
    if f is None:
        return out
    for run_id, us, key in [(f.run, f.steady_us, "fix")] + [(c.run, c.steady_us, f"cost of {c.probe}: {c.toggle}")
                                                           for c in f.costs]:
        r = s.run(run_id)
        got = geomean(steady_us(r).values()) if r else None
        if us is not None and got is not None and abs(round(got, 2) - us) > 0.011:
            out.append(Finding("figure-equal", key, f"states {us:.2f} µs per call; its run {run_id} gives "
                                                    f"{got:.2f}"))
    return out


def audit(s: Session, claims: list[Claim] | None = None) -> list[Finding]:
    """Every statement of the session that its runs cannot bear."""
    claims = derive(s) if claims is None else claims
    return (_verdict(s) + _claims(s, claims) + _cleared(s) + _fix(s) + _cpu(s) + _predictions(s) + _figures(s) +
            _causes(s) + _cleared_same(s) + _fix_figures(s) +
            [Finding(*f) for f in outside(s) + unreached(s, claims) + lost_workers(s, claims) + effects(s) + costs(s)
             + no_probe_claims(s, claims) + untaken(s) + parts(s) + timing_solo(s, claims) + negatives(s, claims)])


def audit_claims(s: Session) -> tuple[list[tuple[Claim, list[Finding]]], list[Finding]]:
    """Every claim with the findings against it, and findings about no printed claim (a run's own status)."""
    claims = derive(s)
    findings = audit(s, claims)
    keys = {c.key for c in claims}
    return ([(c, [f for f in findings if f.claim == c.key]) for c in claims],
            [f for f in findings if f.claim not in keys])
