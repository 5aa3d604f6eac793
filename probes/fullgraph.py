"""fullgraph: does fullgraph=True (graph breaks raise instead of splitting) decide the outcome?"""
from __future__ import annotations

from functools import partial

from diagnose.edits import set_kw
from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("fullgraph", "fullgraph=True on torch.compile", "compile sites with fullgraph=True (static scan)",
                 "fullgraph=True -> False", describe="fullgraph=True", sites=("compile",),
                 requires=("compile_mode",))


def plan(ctx: PlanContext) -> Plan:
    strict = [s for s in ctx.scan.of("compile") if s.details["fullgraph"] is True]
    if not strict:
        return Plan(ABSENT, "no compile site sets fullgraph=True")

    def apply(source: str) -> str:
        return set_kw(source, None, "fullgraph", "False")
    return Plan(RUN, f"fullgraph=True at L{', L'.join(str(s.line) for s in strict)}",
                [Toggle(INFO.name, "fullgraph=False", partial(apply), removes=True)])
