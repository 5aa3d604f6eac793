"""autotune: does Triton's autotuner, compiling and timing every config at run time, cost the time?

Present when the baseline run autotuned: the autotuner's own record (worker/libraries.py) says, per kernel
and key, how many configs it compiled and timed, how long that took, and which config won. Toggle, as the
GPU MODE maintainers advise ("do not autotune on KernelBot; hardcode the configs"): each @triton.autotune
keeps only the configs that won a key in the baseline (for a key whose tuning the deadline cut off, the
best of those it had timed). Inductor's own max-autotune stays with compile_mode.
"""
from __future__ import annotations

import json
from functools import partial

from diagnose.source.edits import apply_edits
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, Plan, PlanContext, ProbeInfo, Toggle, sites

INFO = ProbeInfo("autotune", "Triton autotuning at run time",
                 "the autotuner's record in the baseline run (configs compiled and timed per key, seconds, winner)",
                 "pin each kernel to the configs that won in the baseline",
                 describe="Triton's autotuner compiling and timing every config at run time", sites=("autotune",),
                 needs_baseline=True, ranks={"pinned": 2},
                 mechanisms=("triton_autotune",))


def tuned(run) -> list[dict]:
    """Every (kernel, key) the run autotuned, from all its steps' records."""
    return [t for st in (run.stages if run else []) if st.status != "skipped" for t in st.autotune]


def winners(records: list[dict]) -> dict[str, list[dict]]:
    """Per kernel, the distinct configs that won a key (or, cut off, were the fastest timed so far)."""
    out: dict[str, list[dict]] = {}
    for t in records:
        cfg = t["winner"] if t.get("done") and t.get("winner") else (t.get("best") or {}).get("config")
        if cfg is not None and cfg not in out.setdefault(t["kernel"], []):
            out[t["kernel"]].append(cfg)
    return out


def config_source(cfg: dict, cls: str) -> str:
    extra = "".join(f", {k}={cfg[k]!r}" for k in ("num_ctas", "maxnreg") if k in cfg)
    return f"{cls}({cfg['kwargs']!r}, num_warps={cfg['num_warps']!r}, num_stages={cfg['num_stages']!r}{extra})"


def pin(source: str, pinned: str) -> str:
    """Each @triton.autotune of a kernel in `pinned` (JSON: kernel -> configs) keeps only those configs."""
    want = json.loads(pinned)
    edits = []
    for s in sites(source, "autotune"):
        d = s.details
        cfgs = want.get(d["kernel"])
        if cfgs and d["configs_span"]:
            edits.append((d["configs_span"], "[" + ", ".join(config_source(c, d["config_class"]) for c in cfgs) + "]"))
    return apply_edits(source, edits)


def plan(ctx: PlanContext) -> Plan:
    recs = tuned(ctx.baseline)
    if not recs:
        found = ctx.scan.of("autotune")
        return Plan(ABSENT, "the baseline autotuned nothing" + (
            f" (the @triton.autotune at L{', L'.join(str(s.line) for s in found)} never tuned a key)" if found else ""))
    win = winners(recs)
    editable = {s.details["kernel"] for s in ctx.scan.of("autotune") if s.details["configs_span"]}
    tried = sum(t["tried"] for t in recs)
    seconds = sum(t["seconds"] for t in recs)
    why = (f"{len(recs)} key(s) of {len({t['kernel'] for t in recs})} kernel(s) tuned: {tried} configs compiled and "
           f"timed in {seconds:.1f} s" + ("" if all(t.get("done") for t in recs) else
                                        "; a tuning the deadline cut off keeps the best config it had timed"))
    evidence = {"tuned": [{k: t.get(k) for k in ("kernel", "key", "tried", "seconds", "done")} for t in recs[:20]]}
    pinnable = {k: v for k, v in win.items() if k in editable}
    if not pinnable:
        return Plan(CANNOT_TOGGLE, why + "; no @triton.autotune in the source has configs this probe can edit",
                    evidence=evidence)
    n = sum(len(v) for v in pinnable.values())
    label = f"autotune pinned to the {n} winning config(s)"
    return Plan(RUN, why, [Toggle(INFO.name, label, partial(pin, pinned=json.dumps(pinnable)), removes=True)],
                evidence=evidence)
