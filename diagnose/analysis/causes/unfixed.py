"""A failure that no toggle and no combination fixes: the cause is in the code itself. Where it was when it
failed (the submission's own line, not a library's), and the narrative that says so. Pure.
"""

from __future__ import annotations

from diagnose.analysis.causes.not_looked import clause, looked, not_looked
from diagnose.analysis.effects.effects import credit, effect
from diagnose.analysis.effects.partly import part_removed, what_each_took
from diagnose.analysis.verdict import carried, hotspots
from diagnose.analysis.verdict.comparison import (
    compare,
    confidence_of,
    failure_point,
    is_later,
    probe_site,
    single_runs,
)
from diagnose.analysis.verdict.evidence import effective, far, thin, unjudged
from diagnose.findings import CUT, Cause, Inconclusive, clip, rule_in
from diagnose.session import Role, Run, Session
from diagnose.status import NO_EVIDENCE, UNEXPLAINED, CauseKind, Compared, Confidence, Status
from probes import door
from probes.base import CANNOT_TOGGLE, TUNE


def _user_site(session: Session, site: dict | None) -> dict | None:
    """A site in the run's copy of the submission, as the user's own file and line."""
    if not site:
        return None
    from diagnose.analysis.verdict.summary import source_line
    return {"file": session.submission.get("path"), "line": site["line"], "code": source_line(session, site["line"]),
            "func": site.get("func")}


def unfixed_cause(session: Session, base: Run) -> Cause | Inconclusive:
    st = base.failed_stage
    site = _user_site(session, st.site)
    conf, confirmed = confidence_of(session, [base])
    if st.lost_worker:      # a death, whatever any variant did: no time-based reading applies
        return _lost_worker(session, base, site, conf, confirmed)
    moved = next((r for r in single_runs(session) if door.info(r.probe).moves_work and r.outcome == st.status
                  and failure_point(r) and is_later(failure_point(r), failure_point(base))), None)
    lock = carried.stale_lock(base) if st.status == Status.TIMEOUT else None
    if lock:     # seen directly: the stage's stack in FileBaton.wait, the lock written by the killed step
        return Cause(rank=0, suspects=["extension_build"], kind=CauseKind.STALE_LOCK, confidence=conf,
                     changes_outcome=False, evidence=[base.id], site=site, confirmed=confirmed,
                     narrative=f"{lock[0].upper()}{lock[1:]}. The harness's compile step exists to pre-build "
                               f"extensions for the stage; a build longer than its limit never gets there.")
    hot = hotspots.hot_spot(session, base) if st.status == Status.TIMEOUT else None
    owner = hotspots.owner_probe((hot or {}).get("mechanism"))
    if st.status == Status.TIMEOUT and st.phase == "submission_import" and moved:
        sec = st.phase_s("submission_import")
        where = f" (line {site['line']})" if site else ""
        inside = f", inside {hotspots.mechanism_words(hot['mechanism'])}," if owner else ""
        narrative = (f"The work itself is too slow: {sec:.1f} s at import{where}{inside} until the deadline, and "
                     f"deferring it only moves it: {moved.id} ({moved.toggle}) then times out in "
                     f"{moved.failed_stage.name}/{moved.failed_stage.phase}"
                     f"{hotspots.mechanism_hint(hot['mechanism']) if owner else ''}.")
        conf, confirmed = confidence_of(session, [base, moved])
        return Cause(rank=0, suspects=[owner or moved.probe], kind=CauseKind.TOO_SLOW, narrative=narrative,
                     confidence=conf, changes_outcome=False, evidence=[base.id, moved.id],
                     site=site if owner else probe_site(session, moved.probe), confirmed=confirmed)
    every = _all_failed_alike(session, base) if st.status == Status.TIMEOUT else []
    if every:
        where = f"line {site['line']}" if site else (st.phase or "start-up")
        inside = f" The time goes into {hotspots.describe(hot)}." if hot else ""
        together = " and with every suspect removed together" if any(r.removed for r in every) else ""
        parts = what_each_took(session, base, every)
        narrative = (f"The work itself is too slow wherever it runs: {base.id} was still running at {where} when "
                     f"the {st.budget_s:g} s budget of {st.name} ran out, and every variant timed out too, each "
                     f"toggle alone{together} ({', '.join(r.id for r in every)}), so no suspect the probes know "
                     f"accounts for it." + (f" Some took part of it away: {parts}." if parts else "") + inside +
                     _far(session, base, site or hot or {}))
        return Cause(rank=0, suspects=[owner] if owner else [], kind=CauseKind.TOO_SLOW, narrative=narrative,
                     confidence=conf, changes_outcome=False, evidence=[base.id] + [r.id for r in every],
                     site=site or ({"file": session.submission.get("path"), "line": hot["line"], "code": hot["code"]}
                                   if hot else None), confirmed=confirmed, hot_spot=hot)
    none = tried(session)
    rule = rule_in(session.harness.get("rules") or [], f"{(st.exception or {}).get('type', '')} {st.message}")
    if rule and st.status != Status.TIMEOUT:
        at = f"line {site['line']}" if site else (st.phase or "start-up")
        return Cause(rank=0, suspects=[], kind=CauseKind.HARNESS_RULE, confidence=conf, changes_outcome=False,
                     narrative=(
            f"The harness's own rule stops it, not a bug in the code: {rule['file']} line {rule['line']} sets "
            f"{rule['name']}={rule['value']}, and the submission fails under it ({st.status}: "
            f"{_first_line(st.message)}) at {at} in {st.name}. A fix must obey the rule; {none}."),
            evidence=[base.id], site=site, confirmed=confirmed)
    return _hot_or_code(session, base, site, hot, owner, conf, confirmed, none)


def _hot_or_code(session: Session, base: Run, site: dict | None, hot: dict | None, owner: str | None, conf,
                 confirmed: bool, none: str) -> Cause | Inconclusive:
    """Where the time went (a hot spot), else the code itself at its line; with no probe run, neither: where it
    failed, and that its cause was not looked for."""
    st = base.failed_stage
    if not looked(session):
        return not_looked(session, base, site, None if site or st.status != Status.WRONG else _return_line(session),
                          hot)
    if hot:
        hsite = {"file": session.submission.get("path"), "line": hot["line"], "code": hot["code"]}
        # time inside a library mechanism a probe stands for is that probe's suspect, named, even when no
        # toggle of it could be made or verified
        return Cause(rank=0, suspects=[owner] if owner else [], kind=CauseKind.HOT_SPOT, confidence=conf,
                     changes_outcome=False, narrative=f"The time goes here: {hotspots.describe(hot)}; {none}"
                     f"{hotspots.mechanism_hint(hot.get('mechanism'))}." + _far(session, base, hot),
                     evidence=[base.id], site=hsite, confirmed=confirmed, hot_spot=hot)
    return _in_the_code(session, base, site, conf, confirmed, none)


def stage_cases(session: Session, stage: str) -> int | None:
    """How many cases (each with its first call) the task gives a stage."""
    key = "tests" if stage == "test" else "benchmarks" if stage in ("benchmark", "leaderboard") else None
    cases = (session.task or {}).get(key) if key else None
    return len(cases) if cases else None


def _far(session: Session, run: Run, hot: dict) -> str:
    """How far the run's failed stage is from its budget, from a measure alone on its GPU (evidence.far)."""
    st = run.failed_stage
    said = far(session, run, st, stage_cases(session, st.name), hot.get("line"))
    return f" How far off: {said}." if said else ""


def _lost_worker(session: Session, base: Run, site: dict | None, conf, confirmed: bool) -> Cause:
    """A timeout that is a death: the evaluator's pool worker died, and the harness waits for its task."""
    st = base.failed_stage
    how, phase = st.lost_worker["how"], st.lost_worker["phase"]
    where = f" at line {site['line']}" if site else ""
    at = "at that line" if site else "where it ends the process"
    narrative = (f"Not slow work: {how} ended the evaluator's pool worker{where} in {st.name} ({phase}), "
                 f"{st.wall_s:.1f} s in. The harness's eval.py runs each case in a multiprocessing.Pool worker, and "
                 f"the pool never answers a task whose worker died, so the stage waits out its {st.budget_s:g} s "
                 f"and is reported as timed out. The fix is {at}: return, or raise an Exception (which the harness "
                 f"reports as a crash with its message), instead of ending the process; {tried(session)}.")
    return Cause(rank=0, suspects=[], kind=CauseKind.BUG, confidence=conf if site else Confidence.MEDIUM,
                 narrative=narrative, changes_outcome=False, evidence=[base.id], site=site, confirmed=confirmed)


def _in_the_code(session: Session, base: Run, site: dict | None, conf, confirmed: bool, none: str):
    """No suspect and no rule accounts for it: the code itself, at its line (a wrong result at the line that
    returns it), or, for a timeout that no stack or sample placed in the submission, inconclusive."""
    st = base.failed_stage
    if st.status == Status.TIMEOUT and site is None:
        # Neither the stacks at the deadline nor the sampler put the time in the submission's code: a bug
        # there is a guess, as is anything else. Say where the run was, and no more.
        last = next((p.name for p in reversed(st.phases) if p.name), None)
        after = f", after its phase {last}" if last else ""
        return Inconclusive(probe=UNEXPLAINED, evidence=[base.id], reason=(
            f"{base.id} timed out in {st.name}{after}, but no stack at the deadline and no sample of its run "
            f"was in the submission's code, and {none}; what held it cannot be named from these runs"))
    where = f"{site['file']}:{site['line']}" if site else (st.phase or "start-up")
    untaken = [r.id for r in single_runs(session) if _untaken(session, base, r)]
    if st.status == Status.TIMEOUT and untaken:
        # a toggle that did not take leaves its suspect standing: neither it nor the code itself is shown
        return Inconclusive(probe=UNEXPLAINED, evidence=[base.id, *untaken], reason=(
            f"{base.id} was still running at {where} when the {st.budget_s:g} s budget of {st.name} ran out; {none}; "
            f"so these runs settle neither that suspect nor the code itself"))
    if st.status == Status.WRONG:
        ret = _return_line(session)
        site = site or ret
        at = f" (it returns at line {ret['line']})" if ret else ""
        narrative = (f"The submission's custom_kernel{at} returns a wrong result for "
                     f"{st.phase.split(':', 1)[-1] if st.phase else 'a case'} in {st.name}: {st.message}; {none}: "
                     f"the cause is in that code itself.")
    else:
        where = f"line {site['line']}" if site else where
        if st.status == Status.TIMEOUT:   # at the deadline it was there: stuck or slow, the stacks alone cannot say
            narrative = (f"The submission was still running at {where} when the {st.budget_s:g} s budget of {st.name}"
                         + (f" ({st.phase})" if st.phase else "") + f" ran out; {none}: the cause is in that code "
                         f"itself.")
        else:
            narrative = (f"The submission fails ({st.status}: {st.message}) at {where} in {st.name}" +
                         (f", {st.phase}" if st.phase else "") + f"; {none}: the cause is in that code itself.")
    return Cause(rank=0, suspects=[], kind=CauseKind.BUG, confidence=conf if site else Confidence.MEDIUM,
                 narrative=narrative, changes_outcome=False, evidence=[base.id], site=site, confirmed=confirmed)



def _first_line(text: str) -> str:
    """A message's first line, capped (the submission's text): a cut, or lines left out, end in " (…)"."""
    lines = (text or "").strip().splitlines()
    return clip(lines[0] + (CUT if len(lines) > 1 else ""), 300) if lines else ""


def tried(session: Session) -> str:
    """What was tried and why each failed, instead of a bare "nothing helped": every single toggle's run and
    how it ended, and every probe that found its suspect but could not make or verify a toggle, with why."""
    runs = single_runs(session)
    stuck = [p for p in session.probes if p.get("state") in (CANNOT_TOGGLE, TUNE)]
    if not looked(session):
        return clause(session, other=True)
    if not runs and not stuck:
        return "no probe found a suspect to toggle"
    base = session.baseline
    # a run that got past the failure without taking its suspect's work away passed for another reason: said so
    fixed = [r for r in runs if base is not None and compare(session, base, r) == Compared.FIXED]
    passed = {r.id: why for r in fixed if (why := credit(session, base, r))}
    untaken = {r.id: why for r in runs if r.id not in passed and base is not None and
               (why := _untaken(session, base, r))}
    waiting = {r.id: why for r in runs[:8] if (why := unjudged(session, r))}
    at_risk = {r.id: why for r in runs[:8] if r.id not in waiting and (why := thin(session, r))}
    # what an edit that still failed took away, and how much (a probe's edits together are one more run)
    part = {r.id: why for r in runs[:8] if base is not None and r.id not in passed and r.id not in untaken and
            (why := part_removed(session, base, r))}
    parts = [(f"{r.toggle} ({r.id}) got past it, but {passed[r.id]}" if r.id in passed else
              f"{r.toggle} ({r.id}) ended {effective(session, r).outcome}" +
              (f" in {r.failed_stage.name}" if r.failed_stage else "") +
              (f", and proves nothing: its toggle did not take ({untaken[r.id]})" if r.id in untaken else "") +
              (f", having taken part of it away ({part[r.id]})" if r.id in part else "") +
              (f", but {waiting[r.id]}" if r.id in waiting else "") +
              (f", but at risk: {at_risk[r.id]}" if r.id in at_risk else ""))
             for r in runs[:8]]
    parts += [f"and {len(runs) - 8} more toggle(s)"] if len(runs) > 8 else []
    # a probe's why is our own sentence: whole, never cut
    parts += [f"{p['name']} {p['state']}: {' '.join(str(p.get('why') or '').split())}" for p in stuck]
    return ("no strategy tried is credited with a fix: " if passed else
            "no strategy tried is credited with a fix yet: " if waiting else
            "the strategies tried did not fix it: ") + "; ".join(parts)


def variant_runs(session: Session) -> list[Run]:
    """The variants that say something: single toggles and the bisector's combinations that ran."""
    singles = {r.id for r in single_runs(session)}
    return [r for r in session.runs if (r.id in singles or r.role == Role.COMBINATION)
            and effective(session, r).outcome not in NO_EVIDENCE and r.exercised is not False]


def _all_failed_alike(session: Session, base: Run) -> list[Run]:
    """Every variant that ran ended as the baseline did (a timeout), wherever in its stages: the runs, or []
    when there are none or one of them ended otherwise."""
    runs = variant_runs(session)
    # a toggle whose run shows the suspect's work still there (a pin that did not take) took nothing away: its
    # timeout says nothing of the work without it
    return runs if runs and all(r.outcome == base.outcome and not _untaken(session, base, r) for r in runs) else []


def _untaken(session: Session, base: Run, run: Run) -> str | None:
    """Why the run's toggle did not take, where its run shows that; else None."""
    if not run.probe or not door.known(run.probe):
        return None
    e = effect(session, base, run)
    return e.why_not() if e.untaken else None


def _return_line(session: Session) -> dict | None:
    """Where custom_kernel returns its result (for a wrong result, the line that produced it)."""
    import ast
    try:
        tree = ast.parse(session.submission.get("source") or "")
    except (SyntaxError, RecursionError, ValueError):
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "custom_kernel"), None)
    ret = [n for n in ast.walk(fn) if isinstance(n, ast.Return)] if fn else []
    if not ret:
        return None
    from diagnose.analysis.verdict.summary import source_line
    line = ret[-1].lineno
    return {"file": session.submission.get("path"), "line": line, "code": source_line(session, line)}
