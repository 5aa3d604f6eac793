"""Combine the baseline and the probe runs into ranked causes, cleared suspects, inconclusive suspects and
a verified fix.

Two steps. `search` finds the minimal set of suspects behind a failure; to test a combination it calls
`fails(keep) -> bool` ("with only these suspects left in, does the same failure come back?"), which the
engine answers by running a combined variant. `conclude` is pure: it reads the session's runs and the
search's result and writes the typed conclusions.

What a run may count for (evidence.py has the timing rules):
- a toggle whose edited lines never executed tested nothing: its suspect is inconclusive;
- a variant that fails in a way the baseline did not, at or before the baseline's failure point, is a
  broken toggle (a NameError from the edit, say): inconclusive, shown with its diff, never weighed;
- a time-based result that could not be confirmed alone is reported as unconfirmed;
- a flaky variant (its solo rerun ended differently) supports nothing.

Ranking: changing the outcome comes before saving time. Among toggles that each fix the failure alone,
the one that names the mechanism (recompiling on every call, a mode's own CUDA graphs) ranks above the
blunt one (compile off); the others are listed as alternative fixes with their steady-state cost. A time
difference is claimed only when it is larger than the noise, and confidence follows the effect against
the noise.
"""
from __future__ import annotations

import math
import statistics

from diagnose import carried, evidence, hotspots
from diagnose.evidence import NOISE_ABS, NOISE_REL, confirmations, effective
from diagnose.measures import geomean, stage_seconds, steady_us
from diagnose.session import (FAILURES, NO_EVIDENCE, UNEXPLAINED, Cause, Cleared, Confidence, Fix, FixCost,
                              Inconclusive, Role, Run, Session, Status)
from probes import BY_NAME, ORDER

WORDS = {Status.CRASH: "the crash", Status.TIMEOUT: "the timeout", Status.WRONG: "the wrong result",
         Status.AT_RISK: "the budget risk", Status.TAMPERED: "the tampering"}
BROKEN_TYPES = ("NameError", "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError",
                "UnboundLocalError", "AttributeError")


def ddmin(features: list[str], fails, prefetch=None) -> list[str]:
    """Zeller's delta debugging: a 1-minimal subset of `features` for which fails(subset) holds.

    `prefetch(subsets)`, when given, may evaluate every test of a round at once (in parallel); the
    search itself stays sequential and reads the answers back through `fails`."""
    c, n = list(features), 2
    while len(c) >= 2:
        size = math.ceil(len(c) / n)
        chunks = [c[i:i + size] for i in range(0, len(c), size)]
        if prefetch:
            prefetch(chunks + ([[x for x in c if x not in ch] for ch in chunks] if len(chunks) > 2 else []))
        for ch in chunks:
            if fails(ch):
                c, n = ch, 2
                break
        else:
            for ch in chunks:
                comp = [x for x in c if x not in ch]
                if len(chunks) > 2 and fails(comp):
                    c, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c


# -- measurements derived from runs -------------------------------------------------------------------

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


# -- how a variant compares with the baseline -----------------------------------------------------------

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


def _later(a: tuple, b: tuple) -> bool:
    """Failure point a comes after b: a later stage, or later in the same stage's process."""
    return (a[0], a[2]) > (b[0], b[2])


def _got_past(run: Run, bp: tuple[int, str] | None) -> bool:
    """Did the run finish the stage where the baseline failed (or, for a healthy or at-risk baseline,
    every stage it was given)?"""
    done = {s.name for s in run.stages if s.status in (Status.OK, Status.AT_RISK)}
    if bp is not None:
        return bp[1] in done
    return bool(run.stages) and all(s.status in (Status.OK, Status.AT_RISK) for s in run.stages)


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
    return f"{typ} at line {st.site['line']}" if at_edit or not st.site else f"{st.message}"


def compare(session: Session, base: Run, run: Run) -> str:
    """'same' failure as the baseline, 'fixed', 'moved' (the same kind of failure at a later stage),
    'different' (failed otherwise), 'broken' (the edit broke the program), or 'unknown' (it says
    nothing: not run, interrupted, flaky, never exercised). For a probe whose toggle moves work, a moved
    failure is the same failure."""
    e, b = effective(session, run), effective(session, base)
    if e.outcome in NO_EVIDENCE or b.outcome in NO_EVIDENCE or e.flaky:
        return "unknown"
    if run.exercised is False:
        return "unknown"
    bp, rp = failure_point(base), failure_point(run)
    if rp is None and not _got_past(run, bp):     # not failed yet is not fixed: it must have got there
        return "unknown"
    if e.outcome in FAILURES:
        base_err = (base.failed_stage.exception or {}).get("type") if base.failed_stage else None
        err = (run.failed_stage.exception or {}).get("type") if run.failed_stage else None
        if broken_by_edit(run) and err != base_err:
            return "broken"
        if b.outcome == e.outcome and bp and rp and (bp[1], bp[2]) == (rp[1], rp[2]):
            return "same"
        if bp is None or rp is None or not _later(rp, bp):
            return "different"
        if e.outcome == b.outcome:     # the same kind of failure, later
            return "same" if run.probe in BY_NAME and BY_NAME[run.probe].INFO.moves_work else "moved"
        return "fixed"     # it got past the baseline's failure and failed later, on something else
    if b.outcome == Status.AT_RISK:
        return "fixed" if e.outcome == Status.OK else "same"
    return "fixed" if b.outcome in FAILURES else "same"


def _singles(session: Session) -> list[Run]:
    """Single toggles of the probes that, on the baseline's evidence, had a suspect to toggle."""
    active = {p["name"] for p in session.probes if p["state"] == "run"} if session.probes else set(BY_NAME)
    return [r for r in session.runs if r.role == Role.SINGLE and r.probe in BY_NAME and r.probe in active]


def _failing(session: Session, base: Run) -> bool:
    return effective(session, base).outcome in FAILURES + (Status.AT_RISK,)


def toggle_rank(t) -> int:
    """How specific a toggle (or a run of one) is: its probe's rank for the fragment its label holds."""
    ranks = BY_NAME[t.probe].INFO.ranks
    frag = next((f for f in ranks if f in (getattr(t, "toggle", None) or getattr(t, "label", "") or "")), None)
    return ranks[frag] if frag else 1


_toggle_rank = toggle_rank


# -- search ---------------------------------------------------------------------------------------------

def search(session: Session, removers: list[str], fails, prefetch=None) -> None:
    """Find the minimal set of suspects behind the baseline's failure and record it in
    session.bisection. Single toggles that fix it alone are each necessary, so when the failure comes
    back with only those left in, they are the minimal set and one round settles it; otherwise delta
    debugging searches them all. Both ends are checked first: with every suspect in it must fail, with
    every suspect out it must not.

    `fails(keep)` answers True, False, or None when its run cannot tell (its edits never ran, it was
    interrupted, it is flaky): an unknown answer is never taken as either, so it can only leave the set
    larger or the search undecided, never invent a cause."""
    base = session.baseline
    session.bisection = {"removers": list(removers), "minimal": [], "checked": False}
    if base is None or not _failing(session, base):
        return
    fixing = fixing_probes(session, base)
    if len(fixing) == 1 or not removers:
        session.bisection["minimal"] = fixing[:1]
        return
    ordered = sorted(set(removers) - subsumed(session, base), key=ORDER.index)
    known = [p for p in fixing if p in ordered]
    if prefetch:
        prefetch([ordered, [], known] if known else [ordered, []])
    if fails(ordered) is True and fails([]) is False:
        session.bisection["checked"] = True
        session.bisection["minimal"] = known if known and fails(known) is True else \
            ddmin(ordered, lambda keep: fails(keep) is True, prefetch)


def _fixers(session: Session, base: Run) -> list[Run]:
    return [r for r in _singles(session) if BY_NAME[r.probe].INFO.fixes and compare(session, base, r) in ("fixed", "moved")]


def subsumed(session: Session, base: Run) -> set[str]:
    """Probes that fix the failure only bluntly (compile off) by removing what another fixing suspect
    requires (recompiles, fullgraph and captures around compiled code all need a compile): the other
    suspect names the cause, and the blunt toggle is an alternative fix."""
    fixers = _fixers(session, base)
    probes = {r.probe for r in fixers}
    blunt = {p for p in probes if all(_toggle_rank(r) == 0 for r in fixers if r.probe == p)}
    return {p for p in blunt if any(p in BY_NAME[q].INFO.requires for q in probes - {p})}


def fixing_probes(session: Session, base: Run) -> list[str]:
    """Probes with a single toggle that fixes the failure alone, less the subsumed ones."""
    return sorted({r.probe for r in _fixers(session, base)} - subsumed(session, base), key=ORDER.index)


# -- conclusions ------------------------------------------------------------------------------------------

def conclude(session: Session) -> None:
    """Fill causes, cleared, inconclusive and fix from the runs and the search's result."""
    session.causes, session.cleared, session.inconclusive, session.fix = [], [], [], None
    base = session.baseline
    if base is None or not base.stages or effective(session, base).outcome in NO_EVIDENCE:
        return
    singles = _singles(session)
    verdicts = {r.id: compare(session, base, r) for r in singles}
    _inconclusive(session, base, singles, verdicts)
    failing = _failing(session, base)
    causes: list[Cause] = []
    minimal: list[str] = []
    if failing:
        fixers = [r for r in singles if verdicts[r.id] in ("fixed", "moved") and BY_NAME[r.probe].INFO.fixes]
        # The search's combinations decide an interaction; a single fixing suspect decides itself (and
        # is recomputed here, as solo confirmations may have changed which singles fix it).
        fixing = fixing_probes(session, base)
        minimal = list(session.bisection.get("minimal") or []) if session.bisection.get("checked") else \
            (fixing if len(fixing) == 1 else [])
        if minimal:
            causes.append(_outcome_cause(session, base, minimal, fixers))
        elif effective(session, base).outcome in FAILURES and (
                not singles or any(v != "unknown" for v in verdicts.values())):
            # the run that failed: the baseline, or (a flaky baseline) its solo rerun that did, which is
            # what the harness, running alone, would see
            alone = [c for c in confirmations(session, base) if c.failed_stage]
            failed = alone[-1] if alone and (effective(session, base).flaky or not base.failed_stage) else \
                base if base.failed_stage else None
            if failed is not None:
                c = _unfixed_cause(session, failed)
                (session.inconclusive if isinstance(c, Inconclusive) else causes).append(c)
        causes += _time_savers(session, base, singles, verdicts, minimal)
    causes.sort(key=lambda c: (not c.changes_outcome, -max([v["saved_s"] for v in c.seconds_saved.values()
                                                             if v["claimed"]] or [0])))
    for i, c in enumerate(causes, 1):
        c.rank = i
    session.causes = causes
    blamed = {p for c in causes for p in c.suspects}
    session.cleared = _cleared(session, base, singles, verdicts, blamed, failing)
    session.fix = _fix(session, base)


def _inconclusive(session: Session, base: Run, singles: list[Run], verdicts: dict) -> None:
    by_probe: dict[str, list[Run]] = {}
    for r in singles:
        by_probe.setdefault(r.probe, []).append(r)
    for probe, runs in by_probe.items():
        if any(verdicts[r.id] in ("same", "fixed", "different") for r in runs):
            continue
        reasons = []
        for r in runs:
            e = effective(session, r)
            if e.outcome in NO_EVIDENCE:
                reasons.append(f"{r.toggle}: not run to the end ({e.outcome})")
            elif e.flaky:
                reasons.append(f"{r.toggle}: {e.note}")
            elif r.exercised is False:
                reasons.append(f"{r.toggle}: the run failed before reaching L{', L'.join(map(str, r.watched))} "
                               f"(the edited lines never executed), so it tested nothing")
            elif verdicts[r.id] == "broken":
                reasons.append(f"{r.toggle}: the edit broke the program ({broken_by_edit(r)}), so its result is "
                               f"not weighed")
        session.inconclusive.append(Inconclusive(probe=probe, reason="; ".join(reasons) or "no usable run",
                                                 evidence=[r.id for r in runs]))


def _describe(probe: str, toggles: list[str]) -> str:
    mod = BY_NAME[probe]
    return mod.describe(toggles) if hasattr(mod, "describe") else mod.INFO.describe


def _site(session: Session, probe: str) -> dict | None:
    kinds = BY_NAME[probe].INFO.sites
    hit = next((s for s in session.scan if s["suspect"] in kinds), None)
    return {"file": session.submission.get("path"), "line": hit["line"], "code": hit["code"]} if hit else None


def _confidence(session: Session, runs: list[Run]) -> tuple[Confidence, bool]:
    effs = [effective(session, r) for r in runs]
    confirmed = all(e.confirmed for e in effs)
    if any(e.flaky for e in effs):
        return Confidence.LOW, False
    return (Confidence.HIGH if confirmed else Confidence.MEDIUM), confirmed


def _outcome_cause(session: Session, base: Run, minimal: list[str], fixers: list[Run]) -> Cause:
    what = WORDS.get(effective(session, base).outcome, str(base.outcome))
    by = {p: sorted([r for r in fixers if r.probe == p], key=_toggle_rank, reverse=True) for p in minimal}
    combos = [r for r in session.runs if r.role == Role.COMBINATION and r.outcome not in NO_EVIDENCE]
    if len(minimal) > 1:
        named = " × ".join(_describe(p, [r.toggle for r in by[p]]) for p in minimal)
        fixed_by = [r.toggle for p in minimal for r in by[p][:1]]
        narrative = (f"{what.capitalize()} needs all of: {named}. Taking away any one of them fixes it "
                     f"({'; '.join(fixed_by) or 'shown by the combination runs'}).")
    else:
        p = minimal[0]
        d = _describe(p, [r.toggle for r in by[p]])
        lead = by[p][0] if by[p] else None
        narrative = f"{d[0].upper() + d[1:]} causes {what}: " + (f"{lead.toggle} fixes it." if lead else
                                                                 "removing it fixes it.")
        if lead and lead.outcome in FAILURES:
            later = lead.failed_stage
            narrative += (f" The variant then fails on something else: {later.status} in {later.name} "
                          f"({lead.id}), so it is not a fix by itself.")
        reason = BY_NAME[p].mechanism(session, base) if hasattr(BY_NAME[p], "mechanism") else None
        if reason:
            narrative += f" {reason}"
    deciding = [base] + [r for p in minimal for r in by[p]] + (combos if len(minimal) > 1 else [])
    conf, confirmed = _confidence(session, deciding)
    alternatives = [f"{r.probe}: {r.toggle}" for r in sorted(fixers, key=_toggle_rank, reverse=True)
                    if not (r.probe in minimal and by[r.probe] and r is by[r.probe][0])]
    best = min((r for p in minimal for r in by[p]), key=lambda r: geomean(steady_us(r).values()) or math.inf,
               default=None)
    return Cause(rank=0, suspects=minimal, kind="mechanism", narrative=narrative, confidence=conf,
                 changes_outcome=True, evidence=[r.id for r in deciding], site=_site(session, minimal[0]),
                 sites=[s for s in (_site(session, p) for p in minimal) if s],
                 seconds_saved=seconds_saved(session, base, best) if best else {}, confirmed=confirmed,
                 alternatives=alternatives)


def _user_site(session: Session, site: dict | None) -> dict | None:
    """A site in the run's copy of the submission, as the user's own file and line."""
    if not site:
        return None
    from diagnose.summary import source_line
    return {"file": session.submission.get("path"), "line": site["line"], "code": source_line(session, site["line"]),
            "func": site.get("func")}


def _unfixed_cause(session: Session, base: Run) -> Cause | Inconclusive:
    st = base.failed_stage
    site = _user_site(session, st.site)
    moved = next((r for r in _singles(session) if BY_NAME[r.probe].INFO.moves_work and r.outcome == st.status
                  and failure_point(r) and _later(failure_point(r), failure_point(base))), None)
    conf, confirmed = _confidence(session, [base])
    lock = carried.stale_lock(base) if st.status == Status.TIMEOUT else None
    if lock:     # seen directly: the stage's stack in FileBaton.wait, the lock written by the killed step
        return Cause(rank=0, suspects=["extension_build"], kind="stale_lock", confidence=conf, changes_outcome=False,
                     narrative=f"{lock[0].upper()}{lock[1:]}. The harness's compile step exists to pre-build "
                               f"extensions for the stage; a build longer than its limit never gets there.",
                     evidence=[base.id], site=site, confirmed=confirmed)
    hot = hotspots.hot_spot(session, base) if st.status == Status.TIMEOUT else None
    owner = hotspots.MECHANISM_PROBES.get((hot or {}).get("mechanism") or "")
    if st.status == Status.TIMEOUT and st.phase == "submission_import" and moved:
        sec = st.phase_s("submission_import")
        where = f" (line {site['line']})" if site else ""
        inside = f", inside {hotspots.MECHANISM_WORDS[hot['mechanism']]}," if owner else ""
        narrative = (f"The work itself is too slow: {sec:.1f} s at import{where}{inside} until the deadline, and "
                     f"deferring it only moves it: {moved.id} ({moved.toggle}) then times out in "
                     f"{moved.failed_stage.name}/{moved.failed_stage.phase}"
                     f"{hotspots.MECHANISM_HINTS.get(hot['mechanism'], '') if owner else ''}.")
        conf, confirmed = _confidence(session, [base, moved])
        return Cause(rank=0, suspects=[owner or moved.probe], kind="too_slow", narrative=narrative, confidence=conf,
                     changes_outcome=False, evidence=[base.id, moved.id],
                     site=site if owner else _site(session, moved.probe), confirmed=confirmed)
    none = "no probe found a suspect to toggle" if not _singles(session) else \
        "no probe toggle and no combination of them changed that"
    if hot:
        hsite = {"file": session.submission.get("path"), "line": hot["line"], "code": hot["code"]}
        # time inside a library mechanism a probe stands for is that probe's suspect, named, even when no
        # toggle of it could be made or verified
        return Cause(rank=0, suspects=[owner] if owner else [], kind="hot_spot", confidence=conf,
                     changes_outcome=False, narrative=f"The time goes here: {hotspots.describe(hot)}; {none}"
                     f"{hotspots.MECHANISM_HINTS.get(hot.get('mechanism') or '', '')}.",
                     evidence=[base.id], site=hsite, confirmed=confirmed, hot_spot=hot)
    if st.status == Status.TIMEOUT and site is None:
        # Neither the stacks at the deadline nor the sampler put the time in the submission's code: a bug
        # there is a guess, as is anything else. Say where the run was, and no more.
        last = next((p.name for p in reversed(st.phases) if p.name), None)
        after = f", after its phase {last}" if last else ""
        return Inconclusive(probe=UNEXPLAINED, evidence=[base.id], reason=(
            f"{base.id} timed out in {st.name}{after}, but no stack at the deadline and no sample of its run "
            f"was in the submission's code, and {none}; what held it cannot be named from these runs"))
    where = f"{site['file']}:{site['line']}" if site else (st.phase or "start-up")
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
    return Cause(rank=0, suspects=[], kind="bug", confidence=conf if site else Confidence.MEDIUM,
                 narrative=narrative, changes_outcome=False, evidence=[base.id], site=site, confirmed=confirmed)


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
    from diagnose.summary import source_line
    line = ret[-1].lineno
    return {"file": session.submission.get("path"), "line": line, "code": source_line(session, line)}


def _time_savers(session: Session, base: Run, singles: list[Run], verdicts: dict, minimal: list[str]) -> list[Cause]:
    """Runs that kept the outcome (or reached 'ok') and saved more than the noise somewhere. A healthy
    submission gets none: saving time it does not need is not a cause."""
    out = []
    for r in singles:
        if r.probe in minimal or effective(session, r).outcome != Status.OK or r.switches.get("warm_cache") \
                or verdicts[r.id] in ("fixed", "unknown", "broken"):
            continue
        saved = seconds_saved(session, base, r)
        claimed = {k: v for k, v in saved.items() if v["claimed"] and v["saved_s"] > 0}
        if not claimed:
            continue
        k, v = max(claimed.items(), key=lambda kv: kv[1]["saved_s"])
        ratio = v["saved_s"] / v["noise_s"]
        conf = Confidence.HIGH if ratio >= 4 else Confidence.MEDIUM if ratio >= 2 else Confidence.LOW
        out.append(Cause(rank=0, suspects=[r.probe], kind="mechanism", confidence=conf, changes_outcome=False,
                         narrative=f"{r.toggle} saves {v['saved_s']:.1f} s in {k} (noise ±{v['noise_s']:.1f} s) "
                                   f"without changing the outcome.",
                         evidence=[base.id, r.id], site=_site(session, r.probe), seconds_saved=saved))
    return out


def _cleared(session: Session, base: Run, singles: list[Run], verdicts: dict, blamed: set, failing: bool) -> list[Cleared]:
    out = []
    if not failing:
        return out
    for probe in sorted({r.probe for r in singles} - blamed, key=ORDER.index):
        runs = [r for r in singles if r.probe == probe]
        used = [r for r in runs if verdicts[r.id] == "same"]
        if not used or any(verdicts[r.id] in ("fixed", "different") for r in runs):
            continue
        info = BY_NAME[probe].INFO
        if info.seen is not None and not info.seen(base):
            session.inconclusive = [i for i in session.inconclusive if i.probe != probe] + [Inconclusive(
                probe=probe, evidence=[base.id] + [r.id for r in used],
                reason=f"{', '.join(r.toggle for r in used)}: {base.id} failed before it showed "
                       f"{info.describe} at all, so the toggle had nothing to remove; this says nothing about it")]
            continue
        bp = failure_point(base)
        moved = [r for r in used if bp and failure_point(r) and _later(failure_point(r), bp)]
        if moved and BY_NAME[probe].INFO.moves_work:
            # the failure came back later, where the moved work now runs: that work is part of it, and
            # moving it is no fix; neither cleared nor a cause of its own
            r = moved[0]
            session.inconclusive = [i for i in session.inconclusive if i.probe != probe] + [Inconclusive(
                probe=probe, evidence=[base.id, r.id],
                reason=f"{r.toggle}: {r.id} then failed the same way later, in {r.failed_stage.name}/"
                       f"{r.failed_stage.phase}, where the moved work ran: moving it is no fix, and it does not "
                       f"clear {BY_NAME[probe].INFO.describe}")]
            continue
        conf = all(effective(session, r).confirmed for r in used + [base])
        skipped = [r.toggle for r in runs if r not in used]
        note = f" ({', '.join(skipped)} tested nothing: see inconclusive)" if skipped else ""
        out.append(Cleared(probe=probe, toggles=[r.toggle for r in used], outcome=effective(session, base).outcome,
                           narrative=f"{', '.join(r.toggle for r in used)}: still {base.outcome} — "
                                     f"{BY_NAME[probe].INFO.describe} is not the cause{note}.",
                           evidence=[base.id] + [r.id for r in used], confirmed=conf))
        session.inconclusive = [i for i in session.inconclusive if i.probe != probe]
    return out


# Two H100 runs of one Round 9 variant differed by up to 1.7 % in steady state (92.5 and 94.1 µs per call)
FIX_TIE_REL = 0.02


def _fix(session: Session, base: Run) -> Fix | None:
    if effective(session, base).outcome == Status.OK:
        return None
    # A fix must have gone through every stage the baseline was given (a run that stopped at the failing
    # stage has not shown that it fits the later budgets), and may not be a doubtful pass.
    wanted = [s.name for s in base.stages]
    good = [r for r in session.runs if r.role in (Role.SINGLE, Role.COMBINATION) and r.variant
            and r.outcome == Status.OK and not r.switches.get("warm_cache") and r.exercised is not False
            and (r.probe not in BY_NAME or BY_NAME[r.probe].INFO.fixes)
            and [s.name for s in r.stages] == wanted and all(s.status == Status.OK for s in r.stages)
            and effective(session, r).outcome == Status.OK]
    if not good:
        return None
    scored = sorted(((geomean(steady_us(r).values()) or math.inf, r) for r in good), key=lambda x: x[0])
    best_us, best = scored[0]
    # Within run-to-run noise of the fastest, the fix that names the mechanism wins (it is the one the cause
    # points at); beyond it, speed decides.
    near = [(us, r) for us, r in scored if best_us != math.inf and us <= best_us * (1 + FIX_TIE_REL)]
    if near:
        best_us, best = max(near, key=lambda x: (toggle_rank(x[1]) if x[1].probe in BY_NAME else 0, -x[0]))
    elif best_us == math.inf:
        # No benchmark ran, so no steady state can choose: the toggle of the top cause's suspect, then the one
        # that names a mechanism, is the fix (compile off also passes a recompile storm, but says nothing).
        top = set(session.causes[0].suspects) if session.causes else set()
        best = max((r for _, r in scored), key=lambda r: (r.probe in top, toggle_rank(r) if r.probe in BY_NAME else 0))
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
    """Runs that the verdict, a cause or the fix rests on and that need a solo rerun to be trusted.
    Suspects cleared on doubtful runs are not rerun (that could cost a full budget each): they are
    reported as unconfirmed instead."""
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
    return out
