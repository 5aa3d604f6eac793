"""fullgraph: does fullgraph=True (graph breaks raise instead of splitting) decide the outcome?

Present when a compile call of the baseline asked for fullgraph=True (or, before it ran, when a compile
site in the source does). Toggle: fullgraph=False on those sites.
"""
from __future__ import annotations

from diagnose.facts import observed
from diagnose.source.edits import set_kw
from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle

INFO = ProbeInfo("fullgraph", "fullgraph=True on torch.compile",
                 "compile calls of the baseline with fullgraph=True; before it ran, the compile sites in the source",
                 "fullgraph=True -> False", describe="fullgraph=True", sites=("compile",),
                 requires=("compile_mode",),
                 seen=observed.frames_compiled, takes_away="compile")

TRIAGE = "compile"
COMPILE_KWARGS = ("fullgraph",)     # what its toggle sets on torch.compile, compared by the compile measure


def off(source: str) -> str:
    return set_kw(source, None, "fullgraph", "False")


def plan(ctx: PlanContext) -> Plan:
    strict = [s for s in ctx.scan.of("compile") if s.details["fullgraph"] is True]
    ran = [c for c in observed.compile_calls(ctx.baseline) if c.get("kwargs", {}).get("fullgraph") is True]
    if not strict:
        if ran:
            return Plan(ABSENT, f"fullgraph=True came from L{ran[0]['caller_line']}, where the scan finds no "
                                f"literal fullgraph=True to edit")
        return Plan(ABSENT, "no compile call sets fullgraph=True")
    return Plan(RUN, f"fullgraph=True at L{', L'.join(str(s.line) for s in strict)}",
                [Toggle(INFO.name, "fullgraph=False", off, removes=True)])


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": RUN,
}
