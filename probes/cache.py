"""cache: how much of the cost is a cold compile cache? The same submission runs again on the compile
cache the baseline run left behind (a runtime switch: there is no source change to show).

The harness compiles cold in every fresh container, so a warm-cache win is evidence, never a fix.
"""
from __future__ import annotations

from probes.base import ABSENT, NOT_APPLICABLE, RUN, WARM, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("cache", "cold compile caches", "compile records of the baseline run",
                 "warm cache (reuse the baseline's)", describe="a cold compile cache", sites=("compile",),
                 needs_baseline=True, fixes=False, bisect=False)


def plan(ctx: PlanContext) -> Plan:
    compiled = ctx.baseline is not None and any(st.compile for st in ctx.baseline.stages)
    if not ctx.scan.of("compile") and not compiled:
        return Plan(ABSENT, "nothing is compiled, so no compile cache is involved")
    if ctx.baseline is not None and any(st.killed for st in ctx.baseline.stages):
        return Plan(NOT_APPLICABLE, "the baseline was killed, so its compile cache may hold half-written files; "
                                    "a warm cache is only reused from a run that ended by itself")
    return Plan(RUN, "compiled code: cold versus warm cache", [Toggle(INFO.name, "warm cache", switches=(WARM,))])
