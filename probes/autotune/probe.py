"""autotune: does Triton's autotuner, compiling and timing every config at run time, cost the time?

Present when the baseline run autotuned: the autotuner's own record (hook.py, read back by facts.py) says, per
kernel and key, how many configs it compiled and timed, how long that took, and which config won. Toggle, as the
GPU MODE maintainers advise ("do not autotune on KernelBot; hardcode the configs"): each @triton.autotune
keeps only the configs that won a key in the baseline (for a key whose tuning the deadline cut off, the
best of those it had timed). Inductor's own max-autotune stays with compile_mode.
"""
from __future__ import annotations

import json
from functools import partial

from diagnose.source.edits import apply_edits
from probes.autotune.facts import step_tunes, tuned
from probes.autotune.report import REPORT, report
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.build_at_import import warm_in_main
from probes.finders import sites

__all__ = ["INFO", "MECHANISM_HINTS", "MECHANISM_WORDS", "RECORDS", "REPORT", "TRIAGE", "WORDS", "plan", "records",
           "report", "tuned"]

INFO = ProbeInfo("autotune", "Triton autotuning at run time",
                 "the autotuner's record in the baseline run (configs compiled and timed per key, seconds, winner, "
                 "and which key argument took a new value on every call)",
                 "pin each kernel to the configs that won in the baseline, or to one; drop a key argument that "
                 "changes on every call",
                 describe="Triton's autotuner compiling and timing every config at run time", sites=("autotune",),
                 needs_baseline=True, ranks={"pinned": 2, "key without": 3},
                 mechanisms=("triton_autotune",), takes_away="records",
                 hook="probes.autotune.hook")

MECHANISM_WORDS = {"triton_autotune": "Triton's autotuner (compiling and timing every config)"}
MECHANISM_HINTS = {
    "triton_autotune": "; the GPU MODE maintainers advise against autotuning on the harness: pin the configs",
}
# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("autotune_config", "autotune_done")     # its event kinds before it had a hook
RECORDS = "Triton autotuning"     # its records (facts.py), in words, for the measure of what a toggle took away
TRIAGE = "autotune"
CHURN = 0.8     # a key argument with a new value on at least this share of the calls retunes on (almost) every call


def records(step) -> list[dict]:
    """Its records in one step, each with its seconds: what its toggle takes away (analysis/effects/effects.py)."""
    return step_tunes(step)


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


def churn(records: list[dict], keys: dict[str, list[str]]) -> list[dict]:
    """Key arguments that took a new value on (almost) every call, so that the autotuner tuned again each
    time: {kernel, arg, values, calls}. `keys`: each kernel's key argument names, in order (the autotuner's key
    is those arguments' values, then the tensors' dtypes)."""
    out = []
    for kernel, names in keys.items():
        recs = [t for t in records if t["kernel"] == kernel and t.get("parts")]
        calls = max([t.get("calls") or 0 for t in recs] + [len(recs)])
        for i, name in enumerate(names):
            values = {t["parts"][i] for t in recs if len(t["parts"]) > i}
            if len(values) >= 3 and len(values) >= CHURN * calls:
                out.append({"kernel": kernel, "arg": name, "values": len(values), "calls": calls})
    return out


def drop_key(source: str, kernel: str, arg: str) -> str:
    """The @triton.autotune of `kernel` without `arg` in its key=[...]."""
    edits = [(s.details["key_span"], repr([k for k in s.details["keys"] if k != arg]))
             for s in sites(source, "autotune") if s.details["kernel"] == kernel and s.details.get("keys")]
    return apply_edits(source, edits)


def one_config(records: list[dict], kernel: str) -> dict | None:
    """The config that won the most keys of a kernel (on a tie, the fastest timed)."""
    wins: dict[str, list] = {}
    for t in records:
        cfg = t["winner"] if t.get("done") and t.get("winner") else (t.get("best") or {}).get("config")
        if t["kernel"] == kernel and cfg is not None:
            wins.setdefault(json.dumps(cfg, sort_keys=True), []).append((t.get("best") or {}).get("ms") or 0.0)
    if not wins:
        return None
    best = max(wins, key=lambda c: (len(wins[c]), -min(wins[c])))
    return json.loads(best)


def cache_on_disk(source: str, cases: str) -> str:
    """Each @triton.autotune keeps its results on disk (cache_results=True), and a `__main__` warm-up has the
    harness's compile step tune every shape of the task, so that the stage reads the results instead of tuning."""
    edits = []
    for s in sites(source, "autotune"):
        d = s.details
        if d.get("cache_results_span"):
            edits.append((d["cache_results_span"], "True"))
        elif d.get("call_end"):
            edits.append(([d["call_end"][0], d["call_end"][1], d["call_end"][0], d["call_end"][1]],
                          ", cache_results=True"))
    return warm_in_main(apply_edits(source, edits), json.loads(cases))


def _toggles(recs: list[dict], pinnable: dict, keys: dict, churned: list[dict]) -> list[Toggle]:
    n = sum(len(v) for v in pinnable.values())
    out = [Toggle(INFO.name, f"autotune pinned to the {n} winning config(s)",
                  partial(pin, pinned=json.dumps(pinnable)), removes=True)]
    if n > len(pinnable):     # several winners per kernel still tune on every new key: one config tunes nothing
        single = {k: [one_config(recs, k)] for k in pinnable if one_config(recs, k) is not None}
        out.append(Toggle(INFO.name, "autotune pinned to one config per kernel",
                          partial(pin, pinned=json.dumps(single)), removes=True))
    for c in churned:
        if keys.get(c["kernel"]):
            out.append(Toggle(INFO.name, f"key without {c['arg']}", partial(drop_key, kernel=c["kernel"],
                                                                              arg=c["arg"]), removes=True))
    return out


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
    keys = {s.details["kernel"]: s.details["keys"] for s in ctx.scan.of("autotune") if s.details.get("keys")}
    churned = churn(recs, keys)
    why += "".join(f"; key argument `{c['arg']}` of {c['kernel']} took {c['values']} values in {c['calls']} calls, so "
                   f"the autotuner tuned again on (almost) every call" for c in churned)
    evidence = {"tuned": [{k: t.get(k) for k in ("kernel", "key", "tried", "seconds", "done")} for t in recs[:20]],
                "churn": churned}
    pinnable = {k: v for k, v in win.items() if k in editable}
    if not pinnable:
        return Plan(CANNOT_TOGGLE, why + "; no @triton.autotune in the source has configs this probe can edit",
                    evidence=evidence)
    toggles = _toggles(recs, pinnable, keys, churned)
    if ctx.cases and not churned:    # a key that changes on every call is never found on disk
        toggles.append(Toggle(INFO.name, "tuned in the compile step (cache_results=True, a __main__ warm-up)",
                              partial(cache_on_disk, cases=json.dumps(ctx.cases))))
    return Plan(RUN, why, toggles, evidence=evidence)


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,
    "sliced": {
        "probe.py": {"recs[:20]"},                                          # evidence records
        "report.py": {"rows[:20]"},                                         # table rows
        # the worker's hook imports nothing of diagnose's: values it records (a config's, a key's), not sentences
        "hook.py": {"str(v)[:80]", "str(x)[:80]"},
    },
}
