"""helion_configs: does Helion's search over a kernel's configs=[a, b, ...] list, run at each new shape, cost the
time?

A kernel declared with several configs has no config of its own at a new shape: Helion's FiniteSearch compiles
and benchmarks every listed config there and keeps the fastest. HELION_DISALLOW_AUTOTUNING (the reference-kernels
Helion folders' eval.py sets it) only stops the autotuner that a kernel without configs runs, so such a file
passes the rule and still pays a compile and a benchmark per config per shape, inside the timed stages.

Found from what the run did (hook.py: the searches over the kernel's own list, with the config each chose); the
scan's @helion.kernel sites only place the edit. A tuning run (every shape once, outside any budget) records the
choice per shape; the toggles pin it: per shape, given to each shape's bound kernel before its first call (the
list stays for a shape the table lacks), or one config for every shape. A pin counts only where its run shows the
searches gone (`took`).
"""
from __future__ import annotations

import json
from collections import Counter
from functools import partial

from diagnose.source.refusals import LIMIT_BYTES  # KernelBot refuses a file over it
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, TUNE, Plan, PlanContext, ProbeInfo, Toggle
from probes.helion_configs.evidence import chosen, records, searches, story, took
from probes.helion_configs.pin import module_level, pin_one, pin_per_shape

__all__ = ["INFO", "RECORDS", "TRIAGE", "mechanism", "plan", "records", "took"]

INFO = ProbeInfo("helion_configs", "Helion's search over a kernel's configs=[...] list at each new shape",
                 "the run: Helion's FiniteSearch over a kernel's own listed configs (kernel, shape, seconds, the "
                 "config it chose), which HELION_DISALLOW_AUTOTUNING does not stop",
                 "pin the config a tuning run's search chose, per shape (given to each shape's bound kernel), or one "
                 "config= for every shape",
                 describe="Helion compiling and benchmarking every config of a configs=[...] list at each new shape",
                 sites=("helion",), needs_baseline=True, ranks={"per shape": 2}, takes_away="records",
                 hook="probes.helion_configs.hook")
RECORDS = "Helion searches over a configs list"     # records() in words, for the measure of what a toggle took away
TRIAGE = "autotune"


def _toggles(ctx: PlanContext, found: dict[str, dict]) -> tuple[list[Toggle], list[str]]:
    out, refused = [], []
    for kernel, per_shape in sorted(found.items()):
        site = next((s for s in ctx.scan.of("helion") if s.details["kernel"] == kernel and s.details["configs"]),
                    None)
        if site is None:
            refused.append(f"{kernel}() searched, but no @helion.kernel(configs=[...]) of that name is in the source")
            continue
        cls = site.details["config_class"]
        texts = Counter(json.dumps(c, sort_keys=True) for c in per_shape.values())
        cands = []
        if module_level(ctx.source, kernel):
            rows = json.dumps([[list(k), c] for k, c in per_shape.items()])
            cands.append((f"Helion kernel {kernel} pinned per shape to the configs its search chose "
                          f"({len(per_shape)} shapes, {{size}})", partial(pin_per_shape, kernel=kernel, found=rows,
                                                                        cls=cls)))
        else:
            refused.append(f"per shape: {kernel}() is not defined at module level")
        common, shapes = texts.most_common(1)[0]
        cands.append((f"Helion kernel {kernel} pinned to one config, chosen at {shapes} of {len(per_shape)} shapes "
                      f"({{size}})", partial(pin_one, kernel=kernel, config=common, cls=cls)))
        for label, apply in cands:
            edited = apply(ctx.source)
            size = len(edited.encode())
            if size > LIMIT_BYTES:
                refused.append(f"{label.format(size='')}: the file would be {size:,} bytes, over KernelBot's 1 MB cap")
                continue
            out.append(Toggle(INFO.name, label.format(size=f"+{size - len(ctx.source.encode()):,} bytes"), apply,
                              removes=not any(t.removes for t in out)))
    return out, refused


def plan(ctx: PlanContext) -> Plan:
    if not any(s.details["configs"] for s in ctx.scan.of("helion")) and ctx.baseline is None:
        return Plan(ABSENT, "no @helion.kernel(configs=[...]) in the source")
    recs = searches(ctx.baseline)
    if not recs:
        return Plan(ABSENT, "the baseline ran no Helion search over a configs=[...] list")
    why = story(recs, ctx.baseline)
    evidence = {"searches": [{k: r.get(k) for k in ("kernel", "key", "configs", "seconds", "done")}
                             for r in recs[:20]],
                "lines": sorted({r["line"] for r in recs if isinstance(r.get("line"), int)})}
    if ctx.tuning is None:
        return Plan(TUNE, why + "; a tuning run records the config each shape's search chose", evidence=evidence)
    found = chosen(ctx.tuning)
    if not found:
        errors = "; ".join(sorted({r["error"] for r in searches(ctx.tuning) if r.get("error")})) or "it ran none"
        return Plan(CANNOT_TOGGLE, why + f"; the tuning run {ctx.tuning.id} recorded no search's choice: {errors}",
                    evidence=evidence)
    why += f"; the tuning run {ctx.tuning.id} (not timed) recorded {sum(map(len, found.values()))} shape(s)' choices"
    toggles, refused = _toggles(ctx, found)
    if refused:
        why += "; not offered: " + "; ".join(refused)
    return Plan(RUN if toggles else CANNOT_TOGGLE, why, toggles, evidence=evidence)


def mechanism(session, base) -> str | None:
    """The whole cost: a search at every new shape, summed (the baseline's up to the deadline)."""
    recs = searches(base)
    if not recs:
        return None
    tuning = next((r for r in session.runs if str(r.role) == "tuning"), None)
    tuned = searches(tuning)
    text = story(recs, base) + "."
    if tuned:
        text += (f" The tuning run {tuning.id} (not timed) searched {len(tuned)} shape(s) in "
                 f"{sum(float(r['seconds'] or 0) for r in tuned):.1f} s; pinned, each shape compiles one config.")
    return text


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,
    "sliced": {
        "probe.py": {"recs[:20]"},                                          # evidence records
        "pin.py": {"lines[:node.end_lineno]"},                              # the file through the kernel's def
        "hook.py": {"str(e).strip()[:200]"},           # a worker hook: no diagnose import, so no clip
    },
}
