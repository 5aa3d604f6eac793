"""search: does a search written by hand (a loop that times candidates at each new shape and keeps the best in a
module-level dict) cost the time?

Present when the scan finds such a search. Its result cannot be read from a timed run that the deadline cut
off, so the engine runs one tuning run (every shape once, outside any budget) and reports what the dict
held at the end. The toggle writes that into the source as constants, right after the dict's definition:
the search then finds every shape it would have tuned, and skips. A dict whose keys or values cannot be
written as constants (a function, a compiled kernel) cannot be pinned, and the plan says so.
"""
from __future__ import annotations

from functools import partial

from diagnose.source.edits import apply_edits
from diagnose.source.refusals import LIMIT_BYTES     # KernelBot refuses a file over it
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, TUNE, Plan, PlanContext, ProbeInfo, Toggle, sites

INFO = ProbeInfo("search", "a search written by hand that times candidates at each new shape",
                 "a loop that times candidates (do_bench, CUDA events, a clock) and stores into a module-level dict",
                 "pin what the search kept in a tuning run, per shape, as constants in that dict",
                 describe="a search written by hand, timing candidates at each new shape", sites=("search",),
                 needs_baseline=True, ranks={"pinned": 2}, takes_away="lines")


def pin(source: str, name: str, text: str) -> str:
    """After the dict's module-level definition: its entries from the tuning run, as constants."""
    site = next(s for s in sites(source, "search") if s.details["memo"] == name)
    at = site.details["defined_at"] + 1
    line = (f"# pinned: what the search kept for each shape in a tuning run; it finds them and skips\n"
            f"{name}.update({text})\n")
    return apply_edits(source, [([at, 0, at, 0], line)])


def plan(ctx: PlanContext) -> Plan:
    found = ctx.scan.of("search")
    if not found:
        return Plan(ABSENT, "no loop that times candidates and stores into a module-level dict")
    names = sorted({s.details["memo"] for s in found})
    why = "; ".join(f"the search at L{s.line} in {s.details['function']}() keeps its result in `{s.details['memo']}`"
                    for s in found)
    if ctx.tuning is None:
        return Plan(TUNE, why + "; a tuning run finds what to pin", memo=names)
    kept = {m["name"]: m for st in ctx.tuning.stages for m in st.memo}
    toggles, refused = [], []
    for name in names:
        m = kept.get(name)
        if m is None or not m.get("text"):
            refused.append(f"`{name}`: " + ((m or {}).get("error") or f"the tuning run {ctx.tuning.id} did not end "
                                                                       f"(it reported no contents)"))
            continue
        if not m.get("entries"):
            refused.append(f"`{name}` was empty after the tuning run {ctx.tuning.id}: the search stored nothing")
            continue
        edited = pin(ctx.source, name, m["text"])
        size = len(edited.encode())
        if size > LIMIT_BYTES:
            refused.append(f"`{name}` pinned would make the file {size:,} bytes, over KernelBot's 1 MB cap")
            continue
        toggles.append(Toggle(INFO.name, f"search results pinned in {name} ({m['entries']} shapes, "
                                         f"+{size - len(ctx.source.encode()):,} bytes)",
                              partial(pin, name=name, text=m["text"]), removes=not toggles))
    why += f"; the tuning run {ctx.tuning.id} (not timed) ran it on every shape"
    if refused:
        why += "; cannot pin " + "; ".join(refused)
    return Plan(RUN if toggles else CANNOT_TOGGLE, why, toggles)


def mechanism(session, base) -> str | None:
    """The whole cost: the search runs at every new shape, so it is charged with its sum over the shapes (the
    baseline's first calls up to the deadline, and the tuning run's search over every shape)."""
    firsts = [p for st in base.stages for p in st.phases if p.name.startswith("first_call:")]
    tuning = next((r for r in session.runs if str(r.role) == "tuning"), None)
    tuned = [p for st in (tuning.stages if tuning else []) for p in st.phases if p.name.startswith("tune:")]
    out = []
    if firsts:
        cut = " (the last cut off by the deadline)" if any(p.open for p in firsts) else ""
        out.append(f"It runs at every new shape: the baseline's {len(firsts)} first call(s) took "
                   f"{sum(p.seconds for p in firsts):.1f} s together{cut}")
    if tuned:
        out.append(f"the tuning run {tuning.id} (not timed) spent {sum(p.seconds for p in tuned):.1f} s on its "
                   f"{len(tuned)} shapes")
    return ("; ".join(out) + ".") if out else None
