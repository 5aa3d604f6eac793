"""How far a stage is from its budget, and where its time goes, wherever it runs: said where no toggle fixes a
timeout, and where the best variant still leaves a stage over (or at risk of) its budget. Pure.

Two shapes of "too slow":
- the harness's timing of a benchmark case: its predicted repeats (the stopping rule waits for the mean's
  error to settle, up to a repeat cap), what each repeat costs, and how much of that the calls themselves are;
- work at each new shape: the first calls that finished, what one costs, and how many shapes the stage has.
"""
from __future__ import annotations

import math
import statistics

from diagnose.runs.harness import CALLS_PER_REPEAT, REL_ERROR_TARGET, REPEAT_CAP
from diagnose.session import StageResult
from diagnose.status import TIME_BASED as OVER, Status


def how_far(st: StageResult | None, shapes: int | None = None, line: int | None = None) -> str | None:
    """One sentence, or None where the stage is not over its budget or its record cannot say by how much."""
    if st is None or st.budget_s <= 0 or st.status not in OVER:
        return None
    timed = _timed(st)
    if timed:
        return timed
    return _per_shape(st, shapes, line)


def _timed(st: StageResult) -> str | None:
    cases = [(c, t) for c, t in (st.timing or {}).items() if (t.get("predicted") or {}).get("seconds")]
    if not cases:
        return None
    timed_s = sum(t["predicted"]["seconds"] for _, t in cases)
    rest = sum(p.seconds for p in st.phases if not p.name.startswith("timing:"))
    total = max(st.predicted_s or 0.0, timed_s + rest)
    if total <= st.budget_s:
        return None
    case, t = max(cases, key=lambda ct: ct[1]["predicted"]["seconds"])
    p, wall = t["predicted"], statistics.fmean(t["repeat_wall_s"])
    call = statistics.median(t["per_call_s"])
    calls = CALLS_PER_REPEAT * call
    why = {"repeat cap": f"the harness's stopping rule runs it to its {REPEAT_CAP:,}-repeat cap: the calls' times "
                         f"spread too much (cv {p['cv']:.1%}) for the mean's error to fall under "
                         f"{REL_ERROR_TARGET:.1%}",
           "case wall cap": "the harness's stopping rule runs it to the wall-clock cap of a case"}.get(
        p["reason"], f"the harness's stopping rule needs {p['repeats']:,} repeats for the mean's error to settle")
    out = (f"{st.name} needs about {total / st.budget_s:.1f}× its {st.budget_s:g} s budget ({total:.0f} s "
           f"predicted); the largest share is {case}, {p['seconds']:.0f} s: {why}, at "
           f"{wall * 1e3:.1f} ms a repeat, of which its {CALLS_PER_REPEAT} calls take {calls * 1e3:.2f} ms "
           f"({call * 1e6:.1f} µs each)")
    if wall > 2 * calls:
        out += "; the rest of each repeat is the harness's own step (synchronising, flushing the L2 cache)"
    left = st.budget_s - (total - p["seconds"])
    if left <= 0:
        return out + f"; the other cases and steps alone take {total - p['seconds']:.0f} s of the budget"
    fit = int(left / wall)
    if p["reason"] == "repeat cap" and fit >= 2:
        out += (f"; to fit, {case} has {left:.0f} s, {fit:,} repeats at that cost, which the rule reaches only "
                f"with a spread under {REL_ERROR_TARGET * math.sqrt(fit):.1%}")
    return out


def _per_shape(st: StageResult, shapes: int | None, line: int | None) -> str | None:
    firsts = [p for p in st.phases if p.name.startswith("first_call:")]
    done = [p for p in firsts if not p.open]
    if st.status != Status.TIMEOUT or not firsts or not (st.phase or "").startswith("first_call:"):
        return None
    at = f" at line {line}" if line else ""
    before = sum(p.seconds for p in st.phases if not p.name.startswith("first_call:") and p.name != st.phase)
    if not done:
        cut = next((p for p in firsts if p.name == st.phase), None)
        if cut is None:     # the phase it ended in is no first call it recorded: nothing to measure from
            return None
        return (f"{st.name} ran out {cut.seconds:.1f} s into its first shape's first call{at}, after "
                f"{before:.1f} s of start-up: one shape alone needs more than the {st.budget_s:g} s budget leaves, "
                f"wherever it runs")
    each = statistics.fmean(p.seconds for p in done)
    n = shapes or len(firsts)
    need = before + each * n
    return (f"{st.name} needs about {need / st.budget_s:.1f}× its {st.budget_s:g} s budget wherever it runs: its "
            f"first calls took {each:.1f} s a shape{at} over the {len(done)} that finished, and it has {n} "
            f"shape(s), with {before:.1f} s of start-up and checks beside them")
