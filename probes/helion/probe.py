"""helion: does Helion's autotuner, searching for a config at a kernel's first call per shape, cost the time, or
break a rule of the harness's?

Present when the source has an @helion.kernel and the baseline searched (Helion's own record of each search,
its hook.py), or failed where the problem's evaluator forbids searching (the reference-kernels Helion
folders' eval.py sets HELION_DISALLOW_AUTOTUNING=1: a kernel without a config then raises at its first call).
The fix is the one those folders' own template asks for, "autotune locally for each shape, then paste the best
config here": a tuning run (every shape once, outside any budget) finds the configs, and the toggle writes
them into the source: into the file's per-shape table where it has one (the kernel's factory then passes its
config), else `config=` (one config) or `configs=` (a few, among which Helion picks at the first call without
a search, which the rule allows) on the decorator.
"""
from __future__ import annotations

import json
from functools import partial

from diagnose.facts.observed import unfinished
from diagnose.findings import rule_in
from diagnose.source.edits import apply_edits, kw_edit
from diagnose.source.refusals import LIMIT_BYTES  # KernelBot refuses a file over it
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, TUNE, Plan, PlanContext, ProbeInfo, Toggle
from probes.finders import sites
from probes.helion.facts import step_searches

INFO = ProbeInfo("helion", "Helion autotuning at run time (a kernel without a config)",
                 "@helion.kernel without config= in the source, and the baseline's Helion searches (kernel, shape, "
                 "seconds), or its failure under the evaluator's rule against searching",
                 "pin the configs a tuning run found, per shape: into the file's per-shape table, else config= or "
                 "configs= on the decorator",
                 describe="Helion's autotuner searching for a config at run time", sites=("helion",),
                 needs_baseline=True, ranks={"pinned": 2}, mechanisms=("helion_autotune",), takes_away="records",
                 hook="probes.helion.hook")

MECHANISM_WORDS = {"helion_autotune": "Helion's autotuner"}
# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("helion_tune_start", "helion_tuned")    # its event kinds before it had a hook
RECORDS = "Helion searches"     # its records (records() below), in words, for the measure of what a toggle took away
TRIAGE = "autotune"
DISALLOWED = "AutotuningDisallowedInEnvironment"


def searches(run, listed: frozenset = frozenset()) -> list[dict]:
    """The run's Helion searches, but those of kernels declared with configs=[...] (`listed`): Helion never runs
    its autotuner for those, only a search over the list (the helion_configs probe's)."""
    return [h for st in (run.stages if run else []) if st.status != "skipped" for h in step_searches(st)
            if h.get("kernel") not in listed]


def _listed(ctx: PlanContext) -> frozenset:
    return frozenset(s.details["kernel"] for s in ctx.scan.of("helion") if s.details["configs"])


def records(step) -> list[dict]:
    """Its records in one step, each with its seconds: what its toggle takes away (analysis/effects/effects.py)."""
    return step_searches(step)


def _failure(run) -> str:
    st = run.failed_stage if run else None
    return f"{(st.exception or {}).get('type', '')} {st.message}" if st else ""


def case_key(case: str | None) -> tuple | None:
    """A tuning record's case ('tune:num_tokens=1,hidden_dim=256,group_size=64' or 'tune:256x4096x7168') as
    the tuple of its values: how the reference-kernels template keys its per-shape table."""
    label = (case or "").split(":", 1)[-1]
    parts = [p.partition("=")[2] for p in label.split(",")] if "=" in label else label.split("x")
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return tuple(parts) if all(parts) else None


def config_text(cfg: dict, cls: str) -> str:
    return f"{cls}({', '.join(f'{k}={v!r}' for k, v in sorted(cfg.items()))})"


def _set_kw(source: str, kernel: str, kw: str, value: str) -> str:
    """`kw=value` on the @helion.kernel of `kernel`. A kernel declared with configs= never gets here: the plan
    leaves it to the helion_configs probe (`_listed`)."""
    edits = [kw_edit(source, s.details["kw_spans"], kw, value, bare=s.details["bare_span"], call=s.details["call_span"])
             for s in sites(source, "helion") if s.details["kernel"] == kernel]
    return apply_edits(source, edits)


def pin_table(source: str, kernel: str, found: str) -> str:
    """Each tuned shape's config into the per-shape table (replaced where its key is there, else added), and
    the kernel's factory passes its config where the decorator left config= out."""
    want = {tuple(k): v for k, v in json.loads(found)}
    table = sites(source, "helion_table")[0].details
    cls, edits, have = table["config_class"], [], set()
    for e in table["entries"]:
        key = tuple(e["key"]) if isinstance(e["key"], (list, tuple)) else e["key"]
        if key in want:
            have.add(key)
            edits.append((e["value_span"], config_text(want[key], cls)))
    end = table["dict_span"]
    added = "".join(f"    {k!r}: {config_text(v, cls)},  # tuned by diagnose\n" for k, v in want.items()
                    if k not in have)
    if added:
        edits.append(([end[2], end[3] - 1, end[2], end[3] - 1], "\n" + added if not source.splitlines()[end[2] - 1]
                      [: end[3] - 1].strip() else added))
    out = apply_edits(source, edits)
    site = next(s for s in sites(out, "helion") if s.details["kernel"] == kernel)
    if not site.details["config"] and not site.details["configs"] and site.details["config_param"]:
        out = _set_kw(out, kernel, "config", site.details["config_param"])
    return out


def pin_decorator(source: str, kernel: str, found: str) -> str:
    """config= on the kernel's decorator: the one config of `found` (never configs=[several], which Helion
    searches again at each new shape)."""
    (cfg,) = json.loads(found)
    cls = next(s.details["config_class"] for s in sites(source, "helion") if s.details["kernel"] == kernel)
    return _set_kw(source, kernel, "config", config_text(cfg, cls))


def _size(before: str, after: str) -> str:
    return f"+{len(after.encode()) - len(before.encode()):,} bytes"


def _toggles(ctx: PlanContext, found: dict[str, dict[tuple, dict]]) -> tuple[list[Toggle], list[str]]:
    out, refused = [], []
    tables = ctx.scan.of("helion_table")
    for kernel, per_shape in found.items():
        site = next((s for s in ctx.scan.of("helion") if s.details["kernel"] == kernel), None)
        if site is None:
            continue
        cands = []
        arity = {len(e["key"]) for e in tables[0].details["entries"] if isinstance(e["key"], (list, tuple))} \
            if len(tables) == 1 else set()
        if arity and site.details["config_param"] and all(k is not None and len(k) in arity for k in per_shape):
            apply = partial(pin_table, kernel=kernel, found=json.dumps([[list(k), v] for k, v in per_shape.items()]))
            cands.append((f"Helion configs pinned per shape in {tables[0].details['name']} ({len(per_shape)} shapes"
                          f", {{size}})", apply))
        # never configs=[several]: Helion searches such a list at each new shape (the helion_configs probe)
        distinct = [json.loads(c) for c in dict.fromkeys(json.dumps(v, sort_keys=True) for v in per_shape.values())]
        common = max(distinct, key=lambda c: sum(json.dumps(v, sort_keys=True) == json.dumps(c, sort_keys=True)
                                                 for v in per_shape.values()))
        cands.append((f"Helion kernel {kernel} pinned to one config ({{size}})",
                      partial(pin_decorator, kernel=kernel, found=json.dumps([common]))))
        for label, apply in cands:
            edited = apply(ctx.source)
            if len(edited.encode()) > LIMIT_BYTES:
                refused.append(f"{label.format(size=_size(ctx.source, edited))}: the file would be "
                               f"{len(edited.encode()):,} bytes, over KernelBot's 1 MB cap")
                continue
            out.append(Toggle(INFO.name, label.format(size=_size(ctx.source, edited)), apply, removes=not out))
    return out, refused


def plan(ctx: PlanContext) -> Plan:
    kernels = ctx.scan.of("helion")
    if not kernels:
        return Plan(ABSENT, "no @helion.kernel in the source")
    recs, failure = searches(ctx.baseline, _listed(ctx)), _failure(ctx.baseline)
    rule = rule_in(ctx.rules, failure) if DISALLOWED in failure or "HELION" in failure else None
    if not recs and DISALLOWED not in failure:
        return Plan(ABSENT, "the baseline ran no Helion search (every kernel had its config)")
    why = (f"{len(recs)} Helion search(es) in the baseline, {sum(float(r['seconds'] or 0) for r in recs):.1f} s"
           + unfinished(ctx.baseline, recs)) if recs else \
        "the baseline failed at a Helion kernel's first search"
    if DISALLOWED in failure:
        why += ("; the harness forbids searching: " + (f"{rule['file']} L{rule['line']} sets {rule['name']}="
                                                      f"{rule['value']}" if rule else "its environment forbids it"))
    evidence = {"searches": [{k: r.get(k) for k in ("kernel", "shape", "seconds", "done")} for r in recs[:20]],
                "rule": rule}
    if ctx.tuning is None:
        return Plan(TUNE, why + "; a tuning run finds the configs to pin", evidence=evidence)
    tuned = searches(ctx.tuning, _listed(ctx))
    found: dict[str, dict] = {}
    for r in tuned:
        if r["done"]:
            found.setdefault(r["kernel"], {})[case_key(r.get("case"))] = r["config"]
    evidence["tuned"] = [{k: r.get(k) for k in ("kernel", "case", "seconds", "config", "error")} for r in tuned[:20]]
    if not found:
        errors = "; ".join(sorted({r["error"] for r in tuned if r.get("error")})) or "it ran no search"
        return Plan(CANNOT_TOGGLE, why + f"; the tuning run {ctx.tuning.id} found no config: {errors}",
                    evidence=evidence)
    why += f"; the tuning run {ctx.tuning.id} (not timed) found {sum(len(v) for v in found.values())} config(s)"
    toggles, refused = _toggles(ctx, found)
    if refused:
        why += "; not offered: " + "; ".join(refused)
    if not toggles:
        return Plan(CANNOT_TOGGLE, why, evidence=evidence)
    return Plan(RUN, why, toggles, evidence=evidence)


def mechanism(session, base) -> str | None:
    """The harness's rule, where the evaluator forbids searching, and what the pinned configs were tuned on."""
    rules = session.harness.get("rules") or []
    failure = _failure(base)
    rule = rule_in(rules, failure) if DISALLOWED in failure else None
    tuning = next((r for r in session.runs if str(r.role) == "tuning"), None)
    gpu = next((e.get("gpu") for st in (tuning.stages if tuning else []) for e in st.events if e["k"] == "env"), None)
    out, recs = [], searches(base)
    if recs:    # the whole cost: a search at every new shape, summed, not the slice the deadline cut off
        out.append(f"The baseline searched {len(recs)} time(s) ({len({r['shape'] for r in recs})} shape(s)), "
                   f"{sum(float(r['seconds'] or 0) for r in recs):.1f} s together" + unfinished(base, recs) + ".")
    if rule:
        out.append(f"This is the harness's own rule, not a bug in the code: {rule['file']} line {rule['line']} sets "
                   f"{rule['name']}={rule['value']}, so a Helion kernel without a config may not search on the "
                   f"harness; pinning the configs obeys it.")
    if tuning is not None:
        out.append(f"The configs come from the tuning run {tuning.id} (every shape once, outside any budget, "
                   f"Helion's quick effort, at most 15 s a shape, not timed){' on ' + gpu if gpu else ''}: tuned "
                   f"for this GPU, so on another "
                   f"GPU (the problem's own) they run but may not be the fastest; tune there for the leaderboard.")
    return " ".join(out) or None


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,
    "sliced": {
        "probe.py": {"tuned[:20]", "recs[:20]", "source.splitlines()[end[2] - 1]\n"
                     "                      [: end[3] - 1]"},          # records; a source span
        # the worker's hook imports nothing of diagnose's: values it records, not sentences
        "hook.py": {'", ".join(f"{tuple(a.shape)}:{str(a.dtype).replace(\'torch.\', \'\')}" if '
                    'hasattr(a, "shape") and\n                     hasattr(a, "dtype") else str(a)[:40] '
                    'for a in args)[:300]', "str(a)[:40]", "str(e).strip().splitlines()[0][:300]"},
    },
}
