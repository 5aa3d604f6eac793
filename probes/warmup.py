"""warmup: does the number of warmup iterations decide the outcome or the time?

Toggles N -> 1 and N -> 3 on every warmup loop; the engine derives the seconds per iteration from the
first-call and import times of the N, 3 and 1 runs.
"""
from __future__ import annotations

from functools import partial

from diagnose.edits import apply_edits
from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle, sites

INFO = ProbeInfo("warmup", "warmup loop iteration count",
                 "`for _ in range(N)` loops running compiled or captured work (static scan)", "N -> 1 | N -> 3",
                 describe="the warmup iteration count", sites=("warmup",))


def set_count(source: str, n: int) -> str:
    return apply_edits(source, [(s.details["count_span"], str(n)) for s in sites(source, "warmup")
                                if s.details["count"] > n])


def plan(ctx: PlanContext) -> Plan:
    loops = ctx.scan.of("warmup")
    if not loops:
        return Plan(ABSENT, "no warmup loop around compiled or captured work")
    top = max(s.details["count"] for s in loops)
    toggles = [Toggle(INFO.name, f"warmup N->{n}", partial(set_count, n=n), removes=n == 1)
               for n in (1, 3) if top > n]
    if not toggles:
        return Plan(ABSENT, f"warmup loops already run {top} iteration(s) or fewer")
    where = ", ".join(f"L{s.line} (N={s.details['count']})" for s in loops)
    return Plan(RUN, f"warmup loops at {where}", toggles, evidence={"counts": {s.line: s.details["count"]
                                                                              for s in loops}})
