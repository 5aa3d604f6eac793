"""compile_mode: does the torch.compile mode (or compiling at all) decide the outcome?

Present when the baseline compiled: the compile calls it made (where, with which mode and options) and
the global Inductor settings it compiled with. The scan locates each call to edit it, however it is
written: a decorator, an assignment, a lazy compile inside custom_kernel, model.compile().

Toggles, on every site at once and, where there are several, on one site at a time: compile off;
mode="default"; mode="max-autotune-no-cudagraphs"; the same mode without its CUDA graphs. A site that
sets `options=` instead of a mode gets: options cleared, and the options without CUDA graphs. Global
settings written by the submission (torch._inductor.config.max_autotune = True, triton.cudagraphs) get
their own toggle: that setting off.
"""
from __future__ import annotations

from functools import partial

from diagnose.facts import observed
from diagnose.source.edits import apply_edits, line_span, set_kw
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.finders import sites

INFO = ProbeInfo("compile_mode", "torch.compile mode, or compiling at all",
                 "the baseline's torch.compile calls and Inductor settings; the scan locates each call",
                 "compile off | mode=default | mode=max-autotune-no-cudagraphs | same mode without CUDA graphs | "
                 "options cleared | global setting off",
                 describe="torch.compile (its mode, or compiling at all)", sites=("compile", "config"),
                 ranks={"compile off": 0, "no CUDA graphs": 2, "no-cudagraphs": 2, "cudagraphs off": 2},
                 seen=observed.frames_compiled,
                 mechanisms=("inductor_autotune",), takes_away="compile")

MECHANISM_WORDS = {"inductor_autotune": "Inductor's max-autotune (timing GEMM templates)"}
TRIAGE = "compile"
# what its toggles set on torch.compile (compiling off removes the call), compared by the compile measure; backend and
# disable too: a call that changes them compiles otherwise
COMPILE_KWARGS = ("mode", "options", "backend", "disable")

# Modes that record CUDA graphs (cudagraph trees), and the same mode without them.
RECORDS_GRAPHS = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}
GLOBALS = {"torch._inductor.config.max_autotune": "global max_autotune off",
           "torch._inductor.config.triton.cudagraphs": "global cudagraphs off",
           "torch._inductor.config.max_autotune_gemm": "global max_autotune_gemm off"}


def risks(scan: list[dict]) -> list[dict]:
    """What `check` warns of before any run (spec.py): a max-autotune mode pays its search in every new container."""
    return [{"line": s["line"], "severity": "warning", "message": f"mode={s['details']['mode']} autotunes per shape, "
             f"cold in every new container"} for s in scan if s["suspect"] == "compile"
            and s["details"].get("mode") in ("max-autotune", "max-autotune-no-cudagraphs")]


def describe(fixing: list[str]) -> str:
    """Dropping only the mode's CUDA graphs fixed it: the mode's own CUDA graphs are the suspect, not
    compiling as such."""
    if any("no CUDA graphs" in t or "no-cudagraphs" in t or "cudagraphs off" in t for t in fixing):
        return "a compile mode that records its own CUDA graphs (max-autotune, reduce-overhead)"
    return INFO.describe


def _pick(d: dict, ordinal: int | None) -> bool:
    return ordinal is None or d["ordinal"] == ordinal


def compile_off(source: str, ordinal: int | None) -> str:
    edits = []
    for s in sites(source, "compile"):
        d = s.details
        if not _pick(d, ordinal):
            continue
        if d["kind"] == "decorator":
            edits.append((line_span(d["span"][0], d["span"][2]), ""))
        elif d["kind"] == "module_method":
            edits.append((d["stmt_span"], "pass  # diagnose: compile off"))
        elif d.get("arg_span"):
            edits.append((d.get("expr_span", d["call_span"]), d["wrapped"]))
    return apply_edits(source, edits)


def _drop_graphs(source: str, ordinal: int | None) -> str:
    out = source
    for s in sites(source, "compile"):
        d = s.details
        if _pick(d, ordinal) and d["mode"] in RECORDS_GRAPHS and "options" not in d["kw"]:
            out = set_kw(out, d["ordinal"], "mode", repr(RECORDS_GRAPHS[d["mode"]]))
    return out


def _options(source: str, ordinal: int | None, keep_graphs: bool) -> str:
    """Clear a site's options (default), or keep them without CUDA graphs."""
    out = source
    for s in sites(source, "compile"):
        d = s.details
        if not _pick(d, ordinal) or "options" not in d["kw"]:
            continue
        opts = dict(d["options"]) if keep_graphs else {}
        if keep_graphs:
            opts["triton.cudagraphs"] = False
        out = set_kw(out, d["ordinal"], "options", repr(opts))
    return out


def _global_off(source: str, setting: str) -> str:
    return apply_edits(source, [(s.details["value_span"], "False") for s in sites(source, "config")
                                if s.details["setting"] == setting and s.details["value"] is True])


def _unlocated(ctx: PlanContext) -> list[str]:
    """Compile calls the run made at lines where the scan finds no call it can edit."""
    known = {ln for s in ctx.scan.of("compile") for ln in range(s.line, s.end_line + 1)}
    return [f"L{c['caller_line']} ({c['target']})" for c in observed.compile_calls(ctx.baseline)
            if c["caller_line"] not in known]


def plan(ctx: PlanContext) -> Plan:
    found = ctx.scan.of("compile")
    settings = [s for s in ctx.scan.of("config") if s.details["setting"] in GLOBALS and s.details["value"] is True]
    ran = observed.compiled(ctx.baseline)
    if ctx.baseline is not None and not ran and not found:
        return Plan(ABSENT, "the baseline compiled nothing")
    if not found and not settings:
        if ran:
            where = ", ".join(_unlocated(ctx)) or "a call outside the submission"
            return Plan(CANNOT_TOGGLE, f"the baseline compiled (at {where}), but no torch.compile call in the "
                                       f"source can be edited")
        return Plan(ABSENT, "no torch.compile in the submission")
    graphs = any(s.details["records_graphs"] for s in found)
    with_options = [s for s in found if "options" in s.details["kw"]]
    targets = [(None, "")] + ([(s.details["ordinal"], f" @L{s.line}") for s in found] if len(found) > 1 else [])
    toggles = []
    for ordinal, where in targets if found else []:
        toggles.append(Toggle(INFO.name, "compile off" + where, partial(compile_off, ordinal=ordinal),
                              removes=ordinal is None and not graphs))
        if len(with_options) < len(found):
            for mode in ("default", "max-autotune-no-cudagraphs"):
                toggles.append(Toggle(INFO.name, f"mode={mode}" + where,
                                      partial(set_kw, ordinal=ordinal, kw="mode", value=repr(mode))))
        if any(s.details["mode"] in RECORDS_GRAPHS for s in found):
            toggles.append(Toggle(INFO.name, "same mode, no CUDA graphs" + where,
                                  partial(_drop_graphs, ordinal=ordinal), removes=ordinal is None))
        if with_options:
            toggles.append(Toggle(INFO.name, "options cleared" + where, partial(_options, ordinal=ordinal,
                                                                                keep_graphs=False)))
            if any(s.details["options"].get("triton.cudagraphs") for s in with_options):
                toggles.append(Toggle(INFO.name, "options, no CUDA graphs" + where,
                                      partial(_options, ordinal=ordinal, keep_graphs=True), removes=ordinal is None))
    for s in settings:
        label = GLOBALS[s.details["setting"]]
        toggles.append(Toggle(INFO.name, label, partial(_global_off, setting=s.details["setting"]),
                              removes=not found and "cudagraphs" in label))
    modes = sorted({s.details["mode"] for s in found})
    why = f"{len(found)} compile site(s), mode {', '.join(modes) or 'n/a'}"
    if with_options:
        why += f"; options= at L{', L'.join(str(s.line) for s in with_options)}"
    if settings:
        why += f"; global settings at L{', L'.join(str(s.line) for s in settings)}"
    unlocated = _unlocated(ctx) if ctx.baseline is not None else []
    if unlocated:
        why += f"; compile calls at {', '.join(unlocated)} are not in an editable form and are left as they are"
    return Plan(RUN, why, toggles, evidence={"compile_calls": len(observed.compile_calls(ctx.baseline)),
                                             "settings": observed.inductor_settings(ctx.baseline)})


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": RUN,
}
