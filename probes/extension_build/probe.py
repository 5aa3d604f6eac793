"""extension_build: does building a C++/CUDA extension (load_inline, cpp_extension.load) cost the time?

Present when the baseline built one: each build's record (hook.py, read back by facts.py) says in which step it ran,
how long it took, which outputs ninja built and for how long each (nvcc's per-file time), and whether the
process found another's build lock. The harness's compile step (`python3 submission.py`, 120 s) exists to
pre-build such extensions: a build that finishes inside it is not the cause, and the stages load it built.

Toggles, where the source has something to take away: the flags that only cost build time (debug info,
line info, verbose ptxas), and arch flags for GPUs other than the one the run is on (without them torch
builds for the GPU present); and a build on first use (inside a function) moved to import, where the
compile step builds it (build_at_import.py).
"""
from __future__ import annotations

from functools import partial

from diagnose.source.edits import apply_edits
from probes.base import ABSENT, CANNOT_TOGGLE, NOT_APPLICABLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.build_at_import import build_at_import, why_not
from probes.extension_build.facts import builds, step_builds
from probes.extension_build.report import REPORT, report
from probes.finders import sites

__all__ = ["INFO", "MECHANISM_HINTS", "MECHANISM_WORDS", "RECORDS", "REPORT", "TRIAGE", "WORDS", "builds", "plan",
           "records", "report"]

INFO = ProbeInfo("extension_build", "building a C++/CUDA extension (ninja, nvcc) at run time",
                 "the baseline's load_inline / cpp_extension.load builds (step, seconds, outputs, locks)",
                 "without flags that only cost build time | for this GPU's architecture only | built at import "
                 "(a build on first use moved where the compile step builds it)",
                 describe="a C++/CUDA extension build (ninja, nvcc)", sites=("extension",), needs_baseline=True,
                 bisect=False, ranks={"only cost build time": 2, "architecture only": 2, "built at import": 3},
                 mechanisms=("extension_build", "lock_wait:build"), takes_away="records",
                 hook="probes.extension_build.hook")

# The sampler's names for time inside torch's extension builds (worker/sampler.py), in words, and what to do about it
MECHANISM_WORDS = {"lock_wait:build": "waiting on a torch extension build's lock (FileBaton.wait)",
                   "extension_build": "a torch C++/CUDA extension build (ninja, nvcc)"}
MECHANISM_HINTS = {
    "extension_build": "; the harness's compile step (`python3 submission.py`, 120 s, before each stage) exists to "
                       "pre-build such an extension, so a stage only pays for it when the build does not fit there",
}
# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("extension_build_start", "builds", "found_lock")    # its event kind and field before it had a hook
RECORDS = "extension builds"     # its records (below), in words, for the measure of what a toggle took away
TRIAGE = "build"

BUILD_ONLY = {"-g", "-G", "-lineinfo", "--generate-line-info", "-Xptxas=-v", "--ptxas-options=-v",
              "--resource-usage", "-keep", "--keep"}
ARCH = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code")


def records(step) -> list[dict]:
    """Its records in one step, each with its seconds: what its toggle takes away (analysis/effects/effects.py)."""
    return step_builds(step)


PAIRED = ("-Xptxas", "-gencode", "--generate-code", "-arch", "-code")


def _drop(flags: list[str], unwanted) -> list[str]:
    """The flags without the unwanted ones; a flag that takes its value as the next word goes with it."""
    out, i = [], 0
    while i < len(flags):
        f = flags[i]
        if f in PAIRED and i + 1 < len(flags):
            if not unwanted(f"{f}={flags[i + 1]}"):
                out += [f, flags[i + 1]]
            i += 2
            continue
        if not unwanted(f):
            out.append(f)
        i += 1
    return out


def _slow(f: str) -> bool:
    return f in BUILD_ONLY


def _arch(f: str) -> bool:
    return f.startswith(ARCH)


def edit_flags(source: str, which: str) -> str:
    unwanted = _slow if which == "slow" else _arch
    edits = []
    for s in sites(source, "extension"):
        for kw, val in s.details["flags"].items():
            if isinstance(val, list) and any(isinstance(f, str) for f in val):
                kept = _drop([str(f) for f in val], unwanted)
                if kept != val:
                    edits.append((s.details["flag_spans"][kw], repr(kept)))
    return apply_edits(source, edits)


def _has(ctx: PlanContext, unwanted) -> bool:
    return edit_flags(ctx.source, "slow" if unwanted is _slow else "arch") != ctx.source


def plan(ctx: PlanContext) -> Plan:
    made = builds(ctx.baseline)
    if not made:
        return Plan(ABSENT, "the baseline built no C++/CUDA extension")
    compiled = [b for b in made if b["built"]]
    outputs = {o["output"]: o["seconds"] for b in compiled for o in b["built"]}
    slowest = max(outputs.items(), key=lambda kv: kv[1]) if outputs else None
    desc = "; ".join(f"{b['name']} in the {b['step']}: {float(b['seconds'] or 0):.1f} s" + (
        ", built " + ", ".join(f"{o['output']} {o['seconds']:.1f} s" for o in b["built"][:4]) +
        (f" and {len(b['built']) - 4} more" if len(b["built"]) > 4 else "") if b["built"] else
        ", nothing to build" if b.get("ok") else (", waiting on another process's build lock when its step ended"
                                                   if b.get("found_lock") else ", still building when its step ended")
        if b.get("ok") is None else ", failed") for b in made[:4]) + (f"; and {len(made) - 4} more build(s)"
                                                                      if len(made) > 4 else "")
    evidence = {"builds": [{k: b.get(k) for k in ("name", "step", "seconds", "ok", "found_lock", "killed")}
                           for b in made[:10]], "slowest_output": slowest}
    toggles = []
    if _has(ctx, _slow):
        toggles.append(Toggle(INFO.name, "without flags that only cost build time", partial(edit_flags, which="slow")))
    if _has(ctx, _arch):
        toggles.append(Toggle(INFO.name, "for this GPU's architecture only", partial(edit_flags, which="arch")))
    lazy = why_not(ctx.source)
    if lazy == "" and any(b["step"].endswith("stage") and (b["built"] or b.get("ok") is None) for b in made):
        # built on first use, in the stage: the compile step exists to build it instead
        toggles.append(Toggle(INFO.name, "built at import (the compile step builds it)", build_at_import,
                              removes=True))
    prebuilt = [b for b in made if b["step"].endswith("compile step") and b.get("ok") and not b["killed"]]
    if toggles:
        return Plan(RUN, desc, toggles, evidence=evidence)
    if prebuilt and not any(b["built"] for b in made if b["step"].endswith("stage")):
        b = prebuilt[0]
        return Plan(NOT_APPLICABLE, f"{desc}: the compile step built it in {b['seconds']:.1f} s of its "
                                    f"{b['limit_s']:g} s before the stage, which loaded it built; not the cause",
                    evidence=evidence)
    moved = f"; moving it to import cannot work: {lazy}" if lazy else ""
    return Plan(CANNOT_TOGGLE, f"{desc}; the build has no flags that only cost build time and no arch flags for "
                               f"other GPUs: its time is the compiler's own{moved}", evidence=evidence)


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,
    "sliced": {
        "probe.py": {"made[:10]", "made[:4]", 'b["built"][:4]'},           # records; "and N more"
        "report.py": {"rows[:12]", '(b.get("built") or [])[:6]'},        # table rows
        # the worker's hook imports nothing of diagnose's: the records it sends, capped (values, not sentences)
        "hook.py": {'[os.path.basename(str(x)) for x in (a.get("sources") or [])][:20]',
                    '[str(x) for x in (a.get("extra_cflags") or [])][:30]',
                    '[str(x) for x in (a.get("extra_cuda_cflags") or [])][:30]', "built[:50]"},
    },
}
