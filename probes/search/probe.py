"""search: does a search that the code runs at each new shape (timing candidates, keeping the best) cost the time?

Found from what the run did, however it is spelled (hook.py, in the worker): at a shape's first call, the
submission's own code read a clock (perf_counter and friends, CUDA events, do_bench) between three candidates or
more, and the phase left a choice behind in the module (a dict's new keys, a class's or an instance's attribute,
a functools cache that grew). The scan's syntactic finder (a timed loop that stores into a module-level dict)
still starts the probe before the baseline has ended.

A search's result cannot be read from a timed run that the deadline cut off, so the engine runs one tuning run
(every shape once, outside any budget); the hook reports what each place the searches changed held at its end.
The choice is what the search picked: a value the search held in hand while it timed (a candidate, a timed call's
argument), linked by the hook, never a counter or an input that merely changed at every shape. Where the search's
function (or one above it) returned that value at every shape, the toggle pins the function's return per key
(pin_returns); else it writes the kept places back where the code reads them (pin). A value no literal can hold
(a compiled kernel, a config object) cannot be pinned, and the plan says which and why. A pin counts only where
its run shows the search gone (`took`): a run that still timed candidates proves nothing.
"""
from __future__ import annotations

from functools import partial

from diagnose.facts.observed import cut_by
from diagnose.source.refusals import LIMIT_BYTES  # KernelBot refuses a file over it
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, TUNE, Plan, PlanContext, ProbeInfo, Toggle
from probes.search.absent import absent_why, negatives
from probes.search.evidence import choices, kept_places, returned_choices, searches, story, took, tuned_choices
from probes.search.pin import pin, pin_returns, pinned_where

__all__ = ["INFO", "TRIAGE", "WORDS", "mechanism", "negatives", "plan", "took"]

INFO = ProbeInfo("search", "a search the code runs at each new shape, timing candidates and keeping the best",
                 "the run: the submission's code, in any thread, reading a clock (time's clocks, timeit, "
                 "torch.utils.benchmark, CUDA events, do_bench) between candidates at a shape's first call, what its "
                 "function returned and the state that call left (a dict, a list, an attribute, a cache)",
                 "pin what the search picked in a tuning run, per shape, where the code reads it",
                 describe="a search written by hand, timing candidates at each new shape", sites=("search",),
                 needs_baseline=True, ranks={"pinned": 2}, takes_away="lines", hook="probes.search.hook")

# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("memo",)
TRIAGE = "search"


def plan(ctx: PlanContext) -> Plan:
    scanned = ctx.scan.of("search")
    ran = searches(ctx.baseline, ctx.source) if ctx.baseline is not None else []
    if not scanned and not ran:
        return Plan(ABSENT, absent_why(ctx.baseline))
    why = story(ran, ctx.source) or "; ".join(
        f"the search at L{s.line} in {s.details['function']}() keeps its result in `{s.details['memo']}`"
        for s in scanned)
    # where its time goes: the first line of each search's loop (analysis/effects/effect_lines.py takes its statement)
    evidence = {"lines": sorted({r["span"][0] for r in ran if r["span"]})}
    if ctx.tuning is None:
        return Plan(TUNE, why + "; a tuning run finds what to pin", evidence=evidence,
                    hook_args={"dicts": sorted({s.details["memo"] for s in scanned})})   # hook.py reports them
    places, refused = kept_places(ctx.tuning, ran, [s.details["memo"] for s in scanned])
    why += f"; the tuning run {ctx.tuning.id} (not timed) ran it on every shape"
    tuned = sorted(tuned_choices(ctx.tuning))
    if tuned and not choices([r["changed"] for r in ran]):    # the deadline cut the baseline's phase before it said
        why += f", and there its choice went to `{'`, `'.join(tuned)}`"
    # the code's own table for the choice (a dict, a list, a cache) where it has one; else the function that
    # returned it at every shape (a bare attribute bound again is the weaker link of the two)
    tables = [p for p in places if p.get("kind") != "attr"]
    returned = returned_choices(ctx.tuning, ran)[:1] if refused or not tables else []
    if returned:
        places, refused = [], []
        f = returned[0]
        why += f"; {f['func']}() returned the value it timed at each of {f['entries']} shape(s)"
    toggles = []
    edit = partial(pin_returns, functions=returned) if returned else partial(pin, places=places) if places else None
    if edit is not None:
        try:
            edited = edit(ctx.source)
        except (ValueError, SyntaxError) as e:
            edited, refused = None, [*refused, str(e)]
        size = len(edited.encode()) if edited is not None else 0
        if size > LIMIT_BYTES:
            refused.append(f"pinned, the file would be {size:,} bytes, over KernelBot's 1 MB cap")
        elif edited is not None:
            where, entries = (f"{returned[0]['func']}()'s return", returned[0]["entries"]) if returned else \
                pinned_where(places)
            toggles.append(Toggle(INFO.name, f"search results pinned in {where} ({entries} shapes, "
                                             f"+{size - len(ctx.source.encode()):,} bytes)", edit, removes=True))
    if refused:
        why += "; cannot pin " + "; ".join(refused)
    return Plan(RUN if toggles else CANNOT_TOGGLE, why, toggles, evidence=evidence)


def mechanism(session, base) -> str | None:
    """The whole cost: the search runs at every new shape, so it is charged with its sum over the shapes (the
    baseline's first calls up to the deadline, and the tuning run's search over every shape)."""
    firsts = [p for st in base.stages for p in st.phases if p.name.startswith("first_call:")]
    tuning = next((r for r in session.runs if str(r.role) == "tuning"), None)
    tuned = [p for st in (tuning.stages if tuning else []) for p in st.phases if p.name.startswith("tune:")]
    found = searches(base)
    out = []
    if found:
        out.append(f"The baseline timed {sum(r['candidates'] for r in found)} candidates in "
                   f"{sum(r['seconds'] for r in found):.1f} s over {len({r['phase'] for r in found})} first call(s)")
    if firsts:
        cut_off = [st for st in base.stages for p in st.phases if p.name.startswith("first_call:") and p.open]
        cut = f" (the last cut off by {cut_by(cut_off[-1])})" if cut_off else ""
        out.append(f"it runs at every new shape: the baseline's {len(firsts)} first call(s) took "
                   f"{sum(p.seconds for p in firsts):.1f} s together{cut}")
    if tuned:
        out.append(f"the tuning run {tuning.id} (not timed) spent {sum(p.seconds for p in tuned):.1f} s on its "
                   f"{len(tuned)} shapes")
    if not out:
        return None
    text = "; ".join(out) + "."
    return text[0].upper() + text[1:]


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py), and each slice in its package that shortens something, by file, with why it is
# no cut sentence (tests/test_cuts.py)
EXPECTED = {
    "round9": ABSENT,
    "sliced": {
        "probe.py": {"returned_choices(ctx.tuning, ran)[:1]"},             # the deepest function only
        # the worker's hook imports nothing of diagnose's: values it records (and an identity), not sentences
        "watch.py": {"lines[:6]", "kinds[:4]", "chain[:i]", 'chain[:leaf["depth"] + 1]', "recs[:-1]"},
        "places.py": {"list(added)[:KEYS_SHOWN]", "repr(k)[:80]", "repr(v)[:200]", "repr(obj)[:120]"},
        "key.py": {"code.co_varnames[:n]"},                                 # a function's parameter names
        "pin.py": {"lines[first.lineno - 1][:first.col_offset]"},           # a body line's indent
    },
}
