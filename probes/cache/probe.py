"""cache: how much of the cost is the container starting empty? The same submission runs again in a warm
container: a copy of everything the baseline's container held when it ended (compile caches, built
extensions, tuning plans, files in HOME and the working directory). A runtime switch: no source change.

The harness gives every submission an empty container, so a warm container's win is evidence of what
state on disk is worth, never a fix.
"""
from __future__ import annotations

from probes.base import ABSENT, NOT_APPLICABLE, RUN, WARM, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("cache", "a cold container: empty compile caches, no built extensions, no kept state",
                 "compile records and files the baseline run wrote", "warm container (a copy of the baseline's)",
                 describe="an empty container (cold caches, nothing built)", sites=("compile",),
                 needs_baseline=True, fixes=False, bisect=False, takes_away="switch")
SAVES = ("extension_build",)    # a warm container holds its built extensions: their build time is saved too


def _kept(run) -> int:
    """Files the baseline's steps left in its container."""
    return sum(w["files"] for st in run.stages for step in (st.compile_step, st) if step is not None
               for w in step.state.get("written", {}).values())


def plan(ctx: PlanContext) -> Plan:
    base = ctx.baseline
    compiled = base is not None and any(st.compile for st in base.stages)
    files = _kept(base) if base is not None else 0
    if not ctx.scan.of("compile") and not compiled and not files:
        return Plan(ABSENT, "nothing is compiled and the baseline kept no files, so a warm container holds nothing")
    if base is not None and any(step.killed for st in base.stages for step in (st.compile_step, st) if step):
        return Plan(NOT_APPLICABLE, "the baseline was killed, so its container may hold half-written files or a "
                                    "build's lock; a warm container is only copied from a run that ended by itself")
    why = f"the baseline left {files} file(s) in its container" if files else "compiled code"
    return Plan(RUN, f"{why}: an empty container versus a copy of the baseline's",
                [Toggle(INFO.name, "warm container", switches=(WARM,))], evidence={"files": files})


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": RUN,   # the container's cache is decided from the baseline's run: it always plans its warm run
}
