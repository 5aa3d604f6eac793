"""compile_mode: does the torch.compile mode (or compiling at all) decide the outcome?

Toggles, on every compile site at once and, where there are several, on one site at a time:
compile off; mode="default"; mode="max-autotune-no-cudagraphs"; the same mode without its CUDA graphs.
"""
from __future__ import annotations

from functools import partial

from diagnose.edits import apply_edits, line_span, set_kw
from probes.base import ABSENT, RUN, Plan, PlanContext, ProbeInfo, Toggle, sites

INFO = ProbeInfo("compile_mode", "torch.compile mode, or compiling at all",
                 "torch.compile calls and decorators (static scan)",
                 "compile off | mode=default | mode=max-autotune-no-cudagraphs | same mode without CUDA graphs",
                 describe="torch.compile (its mode, or compiling at all)", sites=("compile",),
                 ranks={"compile off": 0, "no CUDA graphs": 2, "no-cudagraphs": 2})

# Modes that record CUDA graphs (cudagraph trees), and the same mode without them.
RECORDS_GRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


def compile_off(source: str, ordinal: int | None) -> str:
    edits = []
    for s in sites(source, "compile"):
        d = s.details
        if ordinal is not None and d["ordinal"] != ordinal:
            continue
        if d["kind"] == "decorator":
            edits.append((line_span(d["span"][0], d["span"][2]), ""))
        elif d.get("arg_span"):
            edits.append((d["call_span"], d["wrapped"]))
    return apply_edits(source, edits)


def _drop_graphs(source: str, ordinal: int | None) -> str:
    out = source
    for s in sites(source, "compile"):
        d = s.details
        if (ordinal is None or d["ordinal"] == ordinal) and d["mode"] in RECORDS_GRAPHS:
            out = set_kw(out, d["ordinal"], "mode", repr(RECORDS_GRAPHS[d["mode"]]))
    return out


def describe(fixing: list[str]) -> str:
    """Dropping only the mode's CUDA graphs fixed it: the mode's own CUDA graphs are the suspect, not
    compiling as such."""
    if any("no CUDA graphs" in t or "no-cudagraphs" in t for t in fixing):
        return "a compile mode that records its own CUDA graphs (max-autotune, reduce-overhead)"
    return INFO.describe


def plan(ctx: PlanContext) -> Plan:
    found = ctx.scan.of("compile")
    if not found:
        return Plan(ABSENT, "no torch.compile in the submission")
    modes = {s.details["mode"] for s in found}
    with_options = [s.line for s in found if "options" in s.details["kw"]]
    targets = [(None, "")] + ([(s.details["ordinal"], f" @L{s.line}") for s in found] if len(found) > 1 else [])
    toggles = []
    for ordinal, where in targets:
        toggles.append(Toggle(INFO.name, "compile off" + where, partial(compile_off, ordinal=ordinal),
                              removes=ordinal is None and not (modes & set(RECORDS_GRAPHS))))
        if not with_options:
            for mode in ("default", "max-autotune-no-cudagraphs"):
                toggles.append(Toggle(INFO.name, f"mode={mode}" + where,
                                      partial(set_kw, ordinal=ordinal, kw="mode", value=repr(mode))))
        if modes & set(RECORDS_GRAPHS):
            toggles.append(Toggle(INFO.name, "same mode, no CUDA graphs" + where,
                                  partial(_drop_graphs, ordinal=ordinal), removes=ordinal is None))
    why = f"{len(found)} compile site(s), mode {', '.join(sorted(modes))}"
    if with_options:
        why += f"; options= at L{with_options} (mode cannot be combined with options, so only 'off' is tried)"
    return Plan(RUN, why, toggles)
