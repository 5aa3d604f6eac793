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

from diagnose.analysis.comparison import (WORDS, broken_by_edit, compare, confidence_of, failure_point, is_later,
                                          passed_all, probe_site, seconds_saved, single_runs, toggle_rank)
from diagnose.analysis.carried import depends_on_machine
from diagnose.analysis.ddmin import ddmin
from diagnose.analysis.evidence import confirmations, effective
from diagnose.findings import Cause, Cleared, Inconclusive
from diagnose.analysis.fix_choice import choose_fix
from diagnose.facts.measures import geomean, steady_us
from diagnose.analysis.unfixed import unfixed_cause
from diagnose.session import Role, Run, Session
from diagnose.status import FAILURES, NO_EVIDENCE, CauseKind, Compared, Confidence, Status
from probes import BY_NAME, ORDER


def _failing(session: Session, base: Run) -> bool:
    return effective(session, base).outcome in FAILURES + (Status.AT_RISK,)


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
    return [r for r in single_runs(session)
            if BY_NAME[r.probe].INFO.fixes and compare(session, base, r) == Compared.FIXED]


def subsumed(session: Session, base: Run) -> set[str]:
    """Probes that fix the failure only bluntly (compile off) by removing what another fixing suspect
    requires (recompiles, fullgraph and captures around compiled code all need a compile): the other
    suspect names the cause, and the blunt toggle is an alternative fix."""
    fixers = _fixers(session, base)
    probes = {r.probe for r in fixers}
    blunt = {p for p in probes if all(toggle_rank(r) == 0 for r in fixers if r.probe == p)}
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
    singles = single_runs(session)
    verdicts = {r.id: compare(session, base, r) for r in singles}
    _inconclusive(session, base, singles, verdicts)
    failing = _failing(session, base)
    causes: list[Cause] = []
    minimal: list[str] = []
    if failing:
        # a run that failed the same way, only later, fixed nothing: it is not a fixer (see _inconclusive)
        fixers = [r for r in singles if verdicts[r.id] == Compared.FIXED and BY_NAME[r.probe].INFO.fixes]
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
                c = unfixed_cause(session, failed)
                (session.inconclusive if isinstance(c, Inconclusive) else causes).append(c)
        causes += _time_savers(session, base, singles, verdicts, minimal)
    causes.sort(key=lambda c: (not c.changes_outcome, -max([v["saved_s"] for v in c.seconds_saved.values()
                                                             if v["claimed"]] or [0])))
    for i, c in enumerate(causes, 1):
        c.rank = i
    session.causes = causes
    blamed = {p for c in causes for p in c.suspects}
    session.cleared = _cleared(session, base, singles, verdicts, blamed, failing)
    session.fix = choose_fix(session, base)


def _inconclusive(session: Session, base: Run, singles: list[Run], verdicts: dict) -> None:
    by_probe: dict[str, list[Run]] = {}
    for r in singles:
        by_probe.setdefault(r.probe, []).append(r)
    for probe, runs in by_probe.items():
        if any(verdicts[r.id] in (Compared.SAME, Compared.FIXED, Compared.DIFFERENT) for r in runs):
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
            elif verdicts[r.id] == Compared.MOVED:
                st = r.failed_stage
                reasons.append(f"{r.toggle}: {r.id} still ended {r.outcome}, only later ({st.name}/{st.phase}): "
                               f"removing it alone fixes nothing, and it is not cleared either")
            elif verdicts[r.id] == Compared.BROKEN:
                reasons.append(f"{r.toggle}: the edit broke the program ({broken_by_edit(r)}), so its result is "
                               f"not weighed")
        session.inconclusive.append(Inconclusive(probe=probe, reason="; ".join(reasons) or "no usable run",
                                                 evidence=[r.id for r in runs]))


def _describe(probe: str, toggles: list[str]) -> str:
    mod = BY_NAME[probe]
    return mod.describe(toggles) if hasattr(mod, "describe") else mod.INFO.describe


def _outcome_cause(session: Session, base: Run, minimal: list[str], fixers: list[Run]) -> Cause:
    what = WORDS.get(effective(session, base).outcome, str(base.outcome))
    by = {p: sorted([r for r in fixers if r.probe == p], key=toggle_rank, reverse=True) for p in minimal}
    combos = [r for r in session.runs if r.role == Role.COMBINATION and r.outcome not in NO_EVIDENCE]
    if len(minimal) > 1:
        named = " × ".join(_describe(p, [r.toggle for r in by[p]]) for p in minimal)
        leads = [r for p in minimal for r in by[p][:1]]
        fixes = "fixes it" if len(leads) == len(minimal) and all(passed_all(base, r) for r in leads) else \
            "gets past it"
        narrative = (f"{what.capitalize()} needs all of: {named}. Taking away any one of them {fixes} "
                     f"({'; '.join(r.toggle for r in leads) or 'shown by the combination runs'}).")
    else:
        p = minimal[0]
        d = _describe(p, [r.toggle for r in by[p]])
        lead = by[p][0] if by[p] else None
        # "fixes it" only where a run without it passed every stage the baseline ran (audit: cause-fixes)
        fixes = "fixes it" if lead and passed_all(base, lead) else "gets past it"
        narrative = f"{d[0].upper() + d[1:]} causes {what}: " + (f"{lead.toggle} {fixes}." if lead else
                                                                 f"removing it {fixes}.")
        if lead and lead.outcome in FAILURES:
            later = lead.failed_stage
            narrative += (f" The variant then fails on something else: {later.status} in {later.name} "
                          f"({lead.id}), so it is not a fix by itself.")
        reason = BY_NAME[p].mechanism(session, base) if hasattr(BY_NAME[p], "mechanism") else None
        if reason:
            narrative += f" {reason}"
    deciding = [base] + [r for p in minimal for r in by[p]] + (combos if len(minimal) > 1 else [])
    conf, confirmed = confidence_of(session, deciding)
    alternatives = [f"{r.probe}: {r.toggle}" for r in sorted(fixers, key=toggle_rank, reverse=True)
                    if not (r.probe in minimal and by[r.probe] and r is by[r.probe][0])]
    best = min((r for p in minimal for r in by[p]), key=lambda r: geomean(steady_us(r).values()) or math.inf,
               default=None)
    return Cause(rank=0, suspects=minimal, kind=CauseKind.MECHANISM, narrative=narrative, confidence=conf,
                 changes_outcome=True, evidence=[r.id for r in deciding], site=probe_site(session, minimal[0]),
                 sites=[s for s in (probe_site(session, p) for p in minimal) if s],
                 seconds_saved=seconds_saved(session, base, best) if best else {}, confirmed=confirmed,
                 alternatives=alternatives)


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
        out.append(Cause(rank=0, suspects=[r.probe], kind=CauseKind.MECHANISM, confidence=conf, changes_outcome=False,
                         narrative=f"{r.toggle} saves {v['saved_s']:.1f} s in {k} (noise ±{v['noise_s']:.1f} s) "
                                   f"without changing the outcome.",
                         evidence=[base.id, r.id], site=probe_site(session, r.probe), seconds_saved=saved))
    return out


def _cleared(session: Session, base: Run, singles: list[Run], verdicts: dict, blamed: set,
             failing: bool) -> list[Cleared]:
    out = []
    if not failing:
        return out
    for probe in sorted({r.probe for r in singles} - blamed, key=ORDER.index):
        runs = [r for r in singles if r.probe == probe]
        used = [r for r in runs if verdicts[r.id] == Compared.SAME]
        if not used or any(verdicts[r.id] in ("fixed", "different") for r in runs):
            continue
        machine = next((m for m in map(depends_on_machine, used + [base]) if m), "")
        if machine:     # the same outcome here may come from this machine's state: it clears nothing
            session.inconclusive = [i for i in session.inconclusive if i.probe != probe] + [Inconclusive(
                probe=probe, evidence=[base.id] + [r.id for r in used],
                reason=f"{', '.join(r.toggle for r in used)}: the runs depend on {machine}, read from outside "
                       f"their containers, so 'still the same' proves nothing about the harness's runs")]
            continue
        info = BY_NAME[probe].INFO
        if info.seen is not None and not info.seen(base):
            session.inconclusive = [i for i in session.inconclusive if i.probe != probe] + [Inconclusive(
                probe=probe, evidence=[base.id] + [r.id for r in used],
                reason=f"{', '.join(r.toggle for r in used)}: {base.id} failed before it showed "
                       f"{info.describe} at all, so the toggle had nothing to remove; this says nothing about it")]
            continue
        bp = failure_point(base)
        moved = [r for r in used if bp and failure_point(r) and is_later(failure_point(r), bp)]
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


