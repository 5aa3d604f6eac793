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

from diagnose.analysis.causes.cause_story import combination_story, decided_alone, each_alone
from diagnose.analysis.causes.clearing import cleared
from diagnose.analysis.causes.ddmin import ddmin
from diagnose.analysis.causes.fix_choice import choose_fix
from diagnose.analysis.causes.unfixed import unfixed_cause
from diagnose.analysis.effects.effect_parts import not_apart
from diagnose.analysis.effects.effects import credit, effect, one_suspect
from diagnose.analysis.effects.partly import joined_story
from diagnose.analysis.verdict.comparison import (
    WORDS,
    broken_by_edit,
    compare,
    confidence_of,
    passed_all,
    probe_site,
    seconds_saved,
    single_runs,
    toggle_rank,
)
from diagnose.analysis.verdict.evidence import WAITS, confirmations, effective, far, thin, unjudged
from diagnose.analysis.verdict.started import NEVER
from diagnose.analysis.verdict.too_far import OVER
from diagnose.facts.measures import geomean, steady_us
from diagnose.findings import Cause, Inconclusive
from diagnose.session import Role, Run, Session
from diagnose.status import FAILURES, NO_EVIDENCE, CauseKind, Compared, Confidence, Status
from probes import door


def _failing(session: Session, base: Run) -> bool:
    return effective(session, base).outcome in FAILURES + (Status.AT_RISK,)


# -- minimal_set ----------------------------------------------------------------------------------------

def minimal_set(session: Session, removers: list[str], fails, prefetch=None) -> None:
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
    # two probes whose toggles act on one statement are one suspect: the owner stays, the other is not searched
    ordered = sorted(set(removers) - subsumed(session, base) - set(one_suspect(session, single_runs(session))),
                     key=door.names().index)
    known = [p for p in fixing if p in ordered]
    if prefetch:
        prefetch([ordered, [], known] if known else [ordered, []])
    if fails(ordered) is True and fails([]) is False:
        session.bisection["checked"] = True
        minimal = known if known and fails(known) is True else \
            ddmin(ordered, lambda keep: fails(keep) is True, prefetch)
        session.bisection["minimal"] = minimal
        # Another cause that fails it alone: with the first taken away, do the rest still fail? Each such set is a
        # cause of its own (a warmup and a search, each over the budget), never part of an interaction. A single
        # toggle of the first that passed kept all the rest and so already said no: nothing more to run
        rest, more = [p for p in ordered if p not in minimal], []
        while minimal and rest and not set(minimal) & set(fixing) and fails(rest) is True:
            nxt = ddmin(rest, lambda keep: fails(keep) is True, prefetch)
            if not nxt or set(nxt) == set(rest) and fails(nxt) is not True:
                break
            more.append(nxt)
            rest = [p for p in rest if p not in nxt]
        session.bisection["also"] = more


def _fixers(session: Session, base: Run) -> list[Run]:
    """Single toggles that got past the failure and may be credited to their suspect: the run measurably took
    that suspect's work away (effects.py), and no other probe owns the statement it edited."""
    singles = single_runs(session)
    merged = one_suspect(session, singles)
    return [r for r in singles if door.info(r.probe).fixes and r.probe not in merged
            and compare(session, base, r) == Compared.FIXED and credit(session, base, r) is None]


def subsumed(session: Session, base: Run) -> set[str]:
    """Probes that fix the failure only bluntly (compile off) by removing what another fixing suspect
    requires (recompiles, fullgraph and captures around compiled code all need a compile): the other
    suspect names the cause, and the blunt toggle is an alternative fix."""
    fixers = _fixers(session, base)
    probes = {r.probe for r in fixers}
    blunt = {p for p in probes if all(toggle_rank(r) == 0 for r in fixers if r.probe == p)}
    return {p for p in blunt if any(p in door.info(q).requires for q in probes - {p})}


def fixing_probes(session: Session, base: Run) -> list[str]:
    """Probes with a single toggle that fixes the failure alone, less the subsumed ones."""
    return sorted({r.probe for r in _fixers(session, base)} - subsumed(session, base), key=door.names().index)


# -- conclusions ------------------------------------------------------------------------------------------

def conclude(session: Session) -> None:
    """Fill causes, cleared, inconclusive and fix from the runs and the search's result."""
    session.causes, session.cleared, session.inconclusive, session.fix = [], [], [], None
    base = session.baseline
    if base is None or not base.stages or effective(session, base).outcome in NO_EVIDENCE:
        return
    singles = single_runs(session)
    verdicts = {r.id: compare(session, base, r) for r in singles}
    # a run that failed the same way, only later, fixed nothing: it is not a fixer (see _inconclusive); nor is one
    # that got past the failure without measurably taking its suspect's work away
    fixers = _fixers(session, base)
    merged = one_suspect(session, singles)
    _inconclusive(session, base, singles, verdicts, fixers, merged)
    failing = _failing(session, base)
    causes: list[Cause] = []
    minimal: list[str] = []
    if failing:
        # The search's combinations decide an interaction; a single fixing suspect decides itself (and
        # is recomputed here, as solo confirmations may have changed which singles fix it).
        fixing = fixing_probes(session, base)
        minimal = list(session.bisection.get("minimal") or []) if session.bisection.get("checked") else \
            (fixing if len(fixing) == 1 else [])
        minimal = list(dict.fromkeys(merged.get(p, p) for p in minimal))     # one statement, one suspect
        if minimal:
            also = [list(dict.fromkeys(merged.get(p, p) for p in m)) for m in session.bisection.get("also") or []] \
                if session.bisection.get("checked") else []
            causes += [_outcome_cause(session, base, m, fixers) for m in [minimal] + also]
            if also:
                each_alone(session, causes[-1 - len(also):])
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
    # a probe merged into another's suspect is neither cleared nor a cause of its own (see _inconclusive)
    session.cleared = cleared(session, base, singles, verdicts, blamed | set(merged), failing)
    session.fix = choose_fix(session, base)


def _inconclusive(session: Session, base: Run, singles: list[Run], verdicts: dict, fixers: list[Run],
                  merged: dict) -> None:
    by_probe: dict[str, list[Run]] = {}
    for r in singles:
        by_probe.setdefault(r.probe, []).append(r)
    for probe, runs in by_probe.items():
        if probe in merged:
            session.inconclusive.append(Inconclusive(probe=probe, evidence=[r.id for r in runs], reason=(
                f"its toggle edits the same statement as {merged[probe]}'s: one suspect, named {merged[probe]}, not "
                f"two, and never an interaction of the two")))
            continue
        if any(verdicts[r.id] in (Compared.SAME, Compared.DIFFERENT) or r in fixers for r in runs):
            continue
        reasons = []
        for r in runs:
            e = effective(session, r)
            if e.outcome in NO_EVIDENCE:
                reasons.append(f"{r.toggle}: {e.note.removeprefix('unconfirmed: ')}" if WAITS in e.note or
                               NEVER in e.note else f"{r.toggle}: not run to the end ({e.outcome})")
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
            elif verdicts[r.id] == Compared.THIN:
                said = thin(session, r)
                reasons.append(f"{r.toggle}: {said}: at risk, not a fix" if said else
                               f"{r.toggle}: {r.id} passed, but {unjudged(session, r)}")
            elif verdicts[r.id] == Compared.FIXED and (why := credit(session, base, r)):
                reasons.append(f"{r.toggle}: {r.id} got past the failure, but {why}: it is not "
                               f"credited to {door.info(probe).describe}")
        session.inconclusive.append(Inconclusive(probe=probe, reason="; ".join(reasons) or "no usable run",
                                                 evidence=[r.id for r in runs]))


def _describe(probe: str, toggles: list[str]) -> str:
    return door.ask(probe, "describe", fixing=toggles) if door.has(probe, "describe") else door.info(probe).describe


def _outcome_cause(session: Session, base: Run, minimal: list[str], fixers: list[Run]) -> Cause:
    what = WORDS.get(effective(session, base).outcome, str(base.outcome))
    by = {p: sorted([r for r in fixers if r.probe == p], key=toggle_rank, reverse=True) for p in minimal}
    combos = [r for r in session.runs if r.role == Role.COMBINATION and r.outcome not in NO_EVIDENCE]
    if len(minimal) > 1:
        named = " × ".join(_describe(p, [r.toggle for r in by[p]]) for p in minimal)
        leads = [r for p in minimal for r in by[p][:1]]
        fixes = "fixes it" if len(leads) == len(minimal) and all(passed_all(base, r) for r in leads) else \
            "gets past it"
        narrative = f"{what.capitalize()} needs all of: {named}. " + (
            f"Taking away any one of them {fixes} ({'; '.join(r.toggle for r in leads)})." if len(leads) == len(minimal)
            else combination_story(session, base, minimal, combos))
    else:
        p = minimal[0]
        d = _describe(p, [r.toggle for r in by[p]])
        lead = by[p][0] if by[p] else None
        # "fixes it" only where a run without it passed every stage the baseline ran (audit: cause-fixes)
        fixes = "fixes it" if lead and passed_all(base, lead) else "gets past it"
        narrative = f"{d[0].upper() + d[1:]} causes {what}: " + (f"{lead.toggle} {fixes}." if lead else
                                                                 combination_story(session, base, minimal, combos))
        narrative += joined_story(session, base, lead) + decided_alone(session, lead) if lead else ""
        if lead and lead.outcome in FAILURES:
            later = lead.failed_stage
            narrative += (f" The variant then fails on something else: {later.status} in {later.name} "
                          f"({lead.id}), so it is not a fix by itself.")
        far_off = far(session, lead, next((st for st in lead.stages if st.status in OVER), None)) if lead else None
        if far_off and fixes != "fixes it":
            narrative += f" It does not fit yet: in {lead.id}, {far_off}."
        reason = door.ask(p, "mechanism", session=session, base=base)
        if reason:
            narrative += f" {reason}"
    deciding = [base] + [r for p in minimal for r in by[p]] + (combos if len(minimal) > 1 or not by[minimal[0]] else [])
    conf, confirmed = confidence_of(session, deciding)
    # what a deciding toggle took away besides its suspect's work: said, and never credited to the suspect alone
    beside = [f"{r.toggle} also took away {x}" for p in minimal for r in by[p][:1] for x in
              effect(session, base, r).outside]
    if beside:
        narrative += f" {'; '.join(beside)}: the fix is not the suspect's alone."
        conf = Confidence.MEDIUM if conf == Confidence.HIGH else conf
    # one edit that also took away a call in a loop's count, and no run took the two apart: either may be the cause
    if any(not_apart(session, base, r) for p in minimal for r in by[p][:1]):
        conf = Confidence.MEDIUM if conf == Confidence.HIGH else conf
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
                or verdicts[r.id] in ("fixed", "unknown", "broken", "thin"):
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
