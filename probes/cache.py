"""cache: how much of the cost is a cold compile cache? The same submission runs again on the compile
cache the baseline run left behind (a runtime switch: there is no source change to show).

The harness compiles cold in every fresh container, so a warm-cache win is evidence, never a fix.
"""
from __future__ import annotations

from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("cache", "cold compile caches", "torch.compile in the source", "warm cache (reuse the baseline's)")
WARM = "warm_cache"


def plan(ctx: PlanContext) -> Plan:
    if not ctx.scan.of("compile"):
        return Plan(ABSENT, "nothing is compiled, so no compile cache is involved")
    return Plan(RUN, "compiled code: cold versus warm cache", [Toggle(INFO.name, "warm cache", switches=(WARM,))])
