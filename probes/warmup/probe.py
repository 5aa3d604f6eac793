"""warmup: does the number of warmup iterations decide the outcome or the time?

Present when the baseline repeated work before a shape's first result: a loop that holds a large share
of a first call's (or the import's) samples, with its iterations counted where Python can count them;
before the baseline has run, the static scan's warmup loops stand in. The toggle sets each such loop
to 1 and to 3 repetitions, however its count is written: a literal, a constant, a config entry or an
attribute (the `range(...)` at the loop is edited, not the constant, so nothing else changes), a
counter bound, or an elapsed-time bound (which becomes 0: the loop is skipped). A range() count computed by a
call (`range(_warmup_steps(x))`) is two suspects in one edit, the passes and the call: they are also run apart
(call.py), and the cause names the one the runs show.
"""
from __future__ import annotations

import re
from functools import partial

from diagnose.facts import observed
from diagnose.facts.measures import NOISE_ABS, NOISE_REL, first_call
from diagnose.source.edits import apply_edits
from diagnose.source.scan import scan_source
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.search.evidence import searches as found_searches
from probes.warmup import call as warmup_call
from probes.warmup.find import find  # its own loops, scanned alone

INFO = ProbeInfo("warmup", "warmup loop iteration count",
                 "loops that repeat kernel work before a shape's first result (the baseline's samples and loop "
                 "counts; before it has run, the static scan)",
                 "N -> 1 | N -> 3 | a count computed by a call: the count cut with the call kept, the call gone",
                 describe="the warmup iteration count", sites=("warmup",),
                 ranks={warmup_call.STILL: 2, warmup_call.GONE: 2},
                 figures=lambda session: figures(session), takes_away="lines", yields_to=("search",))

TRIAGE = "warmup"


def set_count(source: str, n: int, lines: tuple[int, ...] = (), headers: tuple[str, ...] = (),
              keep: bool = False) -> str:
    """Set the loops at `lines` (or, in a source other toggles have edited, the loops whose header reads
    as one of `headers`) to n repetitions; with `keep`, a range() count is still evaluated, and discarded (the
    calls it makes stay: only the number of passes changes)."""
    loops = scan_source(source, finders=[find]).loops
    if headers:
        src = source.splitlines()
        lines = tuple(ln for ln in loops if src[ln - 1].strip() in set(headers))
    edits = []
    for line in lines:
        lp = loops.get(line)
        if lp is None or (isinstance(lp["count"], (int, float)) and lp["count"] <= n and lp["form"] != "time"):
            continue
        if lp["form"] == "time":
            if n == 1:
                edits.append((lp["count_span"], "0"))
        else:
            new = f"{lp['start_text']} + {n}" if lp["form"] == "range" and lp["start_text"] is not None else str(n)
            edits.append((lp["count_span"], f"({lp['count_text']}, {new})[-1]" if keep and lp["form"] == "range"
                          else new))
    return apply_edits(source, edits)


def _loops(ctx: PlanContext) -> tuple[dict[int, dict], list[str]]:
    """Warmup loops to toggle, by header line, with what was seen of each; and runtime loops that no
    edit can shorten."""
    # a loop that times candidates and keeps the best is a search (its own probe pins it, as the scan or the run found
    # it), not a warmup to cut; nor is a loop inside it (the timing loop of each candidate: cut to no pass, it divides
    # by zero)
    searches = {ln for s in ctx.scan.of("search") for ln in range(s.line, (s.end_line or s.line) + 1)} | {
        ln for r in found_searches(ctx.baseline, ctx.source) for ln in r["span"]}
    found = {s.line: {"count": s.details["count"], "count_text": s.details["count_text"], "from": "source"}
             for s in ctx.scan.of("warmup") if s.line not in searches}
    cannot = []
    for w in observed.repeated_work(ctx.baseline, ctx.source) if ctx.baseline else []:
        if w["line"] in searches:
            continue
        lp = ctx.scan.loops.get(w["line"])
        if lp is not None and not lp["kernel_work"]:
            continue      # a hot loop that repeats no kernel work is not a warmup (see the hot spot)
        if lp is None:
            cannot.append(f"L{w['line']} ({w['seconds']:.1f} s of first calls): it iterates over data, not a count "
                          f"this probe can set")
            continue
        found.setdefault(w["line"], {"count": lp["count"], "count_text": lp["count_text"]})
        found[w["line"]].update({"from": "run", "seconds": round(w["seconds"], 2), "iterations": w["iterations"]})
    return found, cannot


def plan(ctx: PlanContext) -> Plan:
    found, cannot = _loops(ctx)
    if ctx.baseline is not None:
        ran = {ln: v for ln, v in found.items() if v["from"] == "run"}
        if found and not ran and observed.loop_iterations(ctx.baseline) and not any(
                observed.loop_iterations(ctx.baseline).get(ln) for ln in found):
            return Plan(ABSENT, f"warmup loops at L{', L'.join(map(str, found))} never ran in the baseline",
                        evidence={"loops": found})
    if not found:
        if cannot:
            return Plan(CANNOT_TOGGLE, "; ".join(cannot))
        return Plan(ABSENT, "no loop repeated kernel work before a first result")
    lines = tuple(sorted(found))
    counts = [v["count"] for v in found.values() if isinstance(v["count"], (int, float))]
    timed = any(ctx.scan.loops.get(ln, {}).get("form") == "time" for ln in lines)
    top = max(counts) if counts else None
    src = ctx.source.splitlines()
    headers = tuple(src[ln - 1].strip() for ln in lines)
    toggles = [Toggle(INFO.name, f"warmup N->{n}", partial(set_count, n=n, headers=headers), removes=n == 1)
               for n in (1, 3) if top is None or top > n or (timed and n == 1)]
    if not toggles:
        return Plan(ABSENT, f"warmup loops already run {top} iteration(s) or fewer", evidence={"loops": found})
    evidence = {"loops": found, "counts": {ln: v["count"] for ln, v in found.items()}}
    called = warmup_call.calls(ctx.source, ctx.baseline, lines)
    if called:
        # N->1 and N->3 would both take the call away with the count: the edits that run them apart replace them
        toggles, more = warmup_call.toggles(ctx.source, called, headers, set_count)
        evidence.update(more)
    where = ", ".join(f"L{ln} (N={v['count_text']}" + (f", {v['iterations']} iterations" if v.get("iterations") else "")
                      + (f", {v['seconds']} s" if v.get("seconds") else "") + ")" for ln, v in sorted(found.items()))
    return Plan(RUN, f"warmup loops at {where}", toggles, evidence=evidence)


def describe(fixing: list[str]) -> str:
    """A count computed by a call names what the runs that took them apart show; any other, the count."""
    return warmup_call.describe(fixing) or INFO.describe


def mechanism(session, base) -> str | None:
    return warmup_call.story(session, base)


_COUNT_ONLY = re.compile(rf"^warmup N->(\d+)(?:, `.*` {warmup_call.STILL})?$")


def _passes(toggle: str | None) -> int | None:
    """The passes of a toggle that changed only the loop count (a call in the count still made)."""
    m = _COUNT_ONLY.match(toggle or "")
    return int(m.group(1)) if m else None


def per_iteration(session) -> dict | None:
    """Seconds per warmup iteration, from the first-call time of runs that differ only in the loop count
    (the baseline's N, and the warmup probe's 3 and 1): a least-squares slope over (N, seconds)."""
    probe = next((p for p in session.probes if p["name"] == "warmup" and p["state"] == "run"), None)
    base = session.baseline
    if not probe or base is None:
        return None
    # a count written as a variable or a time bound is None: no number of iterations to fit a slope on
    n_base = max((n for n in probe["evidence"].get("counts", {}).values() if isinstance(n, (int, float))),
                 default=None)
    points = []
    for run in session.runs:
        if run is base or (run.probe == "warmup" and _passes(run.toggle) is not None):
            n = n_base if run is base else _passes(run.toggle)
            # only a first call that ended: a phase cut off by the deadline measures the deadline
            fc = [f for f in (first_call(s) for s in run.stages) if f and not f["open"]]
            if n is not None and fc:
                points.append((n, fc[0]["total_s"]))
    if len({n for n, _ in points}) < 2:
        return None
    mn = sum(n for n, _ in points) / len(points)
    mt = sum(t for _, t in points) / len(points)
    slope = sum((n - mn) * (t - mt) for n, t in points) / sum((n - mn) ** 2 for n, _ in points)
    span = max(n for n, _ in points) - min(n for n, _ in points)
    # The same floor the bisector uses: an effect smaller than this is not claimed.
    measurable = abs(slope * span) > max(NOISE_ABS, NOISE_REL * mt)
    return {"seconds_per_iteration": round(slope, 4), "points": sorted(points), "measurable": measurable}


def figures(session) -> list[tuple[str, str, list[str]]]:
    """The warmup's cost per iteration, as a claim: (key, sentence, the runs whose first calls give it)."""
    w = per_iteration(session)
    if not w:
        return []
    pts = ", ".join(f"N={n}: {t:.2f} s" for n, t in w["points"])
    runs = [r.id for r in session.runs
            if r is session.baseline or (r.probe == "warmup" and _passes(r.toggle) is not None)]
    if w["measurable"] and w["seconds_per_iteration"] < 0:   # more iterations, shorter first calls: no cost
        return [("warmup per iteration", f"Warmup shows no cost per iteration: the first calls were shorter with "
                                         f"more iterations ({pts})", runs)]
    if w["measurable"]:
        return [("warmup per iteration", f"Warmup costs about {w['seconds_per_iteration']:.3f} s per iteration "
                                         f"(first call, {pts})", runs)]
    return [("warmup per iteration", f"Warmup has no measurable cost per iteration: the first calls differ by less "
                                     f"than the noise ({pts})", runs)]


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": RUN,
}
