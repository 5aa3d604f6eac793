"""recompile: do recompiles (new shapes, specialised values) cost time or break the run?

Evidence comes from the baseline run's compile metrics: a compile id "F/R" with R > 0 is a recompile of
frame F, with torch's stated reason; and the recompiles its worker hook (hook.py) saw start, which a deadline
cut off before they landed (facts.py). Toggle: dynamic=True on the compile sites, so one compile serves
every shape.
"""
from __future__ import annotations

from functools import partial

from diagnose.findings import clip
from diagnose.source.edits import set_kw
from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.build_at_import import shapes
from probes.recompile.facts import recompile_records

INFO = ProbeInfo("recompile", "recompiles per new shape or value",
                 "compile metrics of the baseline run (compile ids, recompile reasons)", "dynamic=True",
                 describe="recompiling for every new shape or value", sites=("compile",), needs_baseline=True,
                 plans_early=True,
                 ranks={"dynamic=True": 3}, requires=("compile_mode",),
                 seen=lambda run: bool(recompile_records(run)), takes_away="compile",
                 hook="probes.recompile.hook")

# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("recompile_start",)    # its event kind before it had a hook
COUNTS = "recompiles"           # what count() counts, in words, for the compile measure
COMPILE_KWARGS = ("dynamic",)   # what its toggle sets on torch.compile, compared by the compile measure
TRIAGE = "compile"


def recompiles(run) -> list[dict]:
    return recompile_records(run)


def count(run) -> int:
    """How many recompiles the run shows: the compile measure compares it in both runs (analysis/effects/effects.py)."""
    return len(recompile_records(run))


def failed_on_limit(run) -> bool:
    st = run.failed_stage if run else None
    return bool(st and st.exception and "recompile" in (st.exception.get("type", "") + st.message).lower())


def mechanism(session, base) -> str | None:
    """torch's own words for why it recompiled, from the baseline's compile records."""
    recs = recompiles(base)
    reasons = sorted({clip(str(r["reason"]).strip().splitlines()[0], 160) for r in recs if r.get("reason")})
    if not recs:
        return None
    cut = sum(1 for r in recs if r.get("in_progress"))
    return (f"The baseline recompiled {len(recs)} time(s)" + (f" (the last {cut} still compiling at the deadline)"
                                                              if cut else "")
            + (f"; torch's reason: {reasons[0]}" if reasons else "") + ".")


def _toggle() -> Toggle:
    return Toggle(INFO.name, "dynamic=True", partial(set_kw, ordinal=None, kw="dynamic", value="True"), removes=True)


def _from_source(ctx: PlanContext, found: list) -> Plan:
    """Before the baseline: a compile site not marked dynamic=True, and a task whose cases come in several
    shapes. torch specialises on the first shape it sees and compiles again for a new one, so the toggle can
    start with the first wave; the baseline's compile records are the evidence its plan is made again from."""
    n = len(shapes(ctx.cases))
    sites = [s for s in found if s.details["kw"].get("dynamic") is not True]
    if n < 2 or not sites:
        return Plan(ABSENT, "decided from the baseline's compile records")
    where = ", ".join(f"L{s.line}" for s in sites)
    return Plan(RUN, f"torch.compile at {where} is not dynamic, and the task's cases come in {n} shapes: a new "
                     f"shape compiles again (from the source: the baseline's compile records say how often)",
                [_toggle()], evidence={"shapes": n})


def plan(ctx: PlanContext) -> Plan:
    found = ctx.scan.of("compile")
    if not found:
        return Plan(ABSENT, "no torch.compile, so nothing recompiles")
    if ctx.baseline is None:
        return _from_source(ctx, found)
    recs = recompiles(ctx.baseline)
    if not recs and not failed_on_limit(ctx.baseline):
        return Plan(ABSENT, "the baseline run recompiled nothing", evidence={"recompiles": 0})
    if all(s.details["kw"].get("dynamic") is True for s in found):
        return Plan(ABSENT, "every compile site is already dynamic=True", evidence={"recompiles": len(recs)})
    reasons = sorted({clip(" ".join(str(r["reason"]).split()), 160) for r in recs if r["reason"]})
    cut = [r for r in recs if r.get("in_progress")]
    why = f"{len(recs)} recompile(s) in the baseline" + (f"; reasons: {'; '.join(reasons[:3])}" if reasons else "")
    if cut:
        why += (f"; {len(cut)} of them still compiling when the {cut[0]['stage']} stage ended "
                f"({len(recs) - len(cut)} finished before it)")
    if failed_on_limit(ctx.baseline):
        why += "; the baseline hit the recompile limit"
    # bounded: a recompile storm has thousands; the count and the first few say it
    kept = [{**r, "reason": clip(" ".join(str(r["reason"] or "").split()), 300)} for r in recs[:5]]
    return Plan(RUN, why, [_toggle()], evidence={"recompiles": len(recs), "first": kept})


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,   # from the source too, were the task's cases of several shapes (none given)
    "sliced": {
        "probe.py": {"recs[:5]", "reasons[:3]"},                            # evidence records
        "hook.py": {"list(out)[:3]", "str(r)[:300]"},     # a worker hook: torch's first reasons, capped
    },
}
