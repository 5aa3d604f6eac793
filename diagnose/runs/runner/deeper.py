"""A stage's time where a short timing sample cannot place it against its budget: measured further before anything
is judged on it.

The default depth times a few repeats of each benchmark case and predicts the stopping rule's seconds from their
mean and spread (stage_facts.predict_stage). A short sample's spread is itself uncertain: its 95 % range can run
from well under the budget to over it, and check's margin rule (the top of that range, and RUNNER_ALLOWANCE for a
slower or busier runner) then called a kernel measured at a fifth of its budget at risk. Where the range, or the
margin rule's allowance on it, straddles the budget, the stage's timing loops run again in the same container
(more repeats; then every repeat, as --full does) until the stage falls on one side. The rest of the stage (its
imports, first calls and checks) keeps its first, cold measure: a second pass of it runs warm. Only on a GPU: a
CPU's time decides nothing.
"""
from __future__ import annotations

import dataclasses

from diagnose.runs import harness
from diagnose.runs.protocol import Depth
from diagnose.session import StageResult
from diagnose.status import Status

# each further measure, in order, while the stage stays undecided: more repeats a case, then the whole stopping rule
LADDER = ({"sample_repeats": 50, "sample_seconds": 15.0}, {"depth": Depth.FULL})


def undecided(st: StageResult) -> bool:
    """A passed stage whose predicted 95 % range, or the margin rule's allowance on it, straddles its budget."""
    if st.status != Status.OK or not st.predicted_range or not st.budget_s:
        return False
    lo, hi = st.predicted_range
    up = 1 + harness.RUNNER_ALLOWANCE
    return lo <= st.budget_s < hi or lo * up <= st.budget_s < hi * up


def loops_s(st: StageResult) -> float:
    return sum(p.seconds for p in st.phases if p.name.startswith("timing:"))


def repeats(st: StageResult) -> int:
    """The fewest timed repeats of any case of the stage."""
    return min((len(t.get("per_call_s") or []) for t in st.timing.values()), default=0)


def merged(cold: StageResult, deeper: StageResult) -> StageResult:
    """The stage with its timing loops from `deeper` (a further measure in the same container) and the rest of its
    time from `cold`. A further measure that failed (at full depth, a stage over its budget times out) is the
    stage's ending; one the user stopped leaves `cold` as it was."""
    lo, hi = cold.predicted_range or (cold.predicted_s, cold.predicted_s)
    was = (f"a {repeats(cold)}-repeat sample's 95 % range ({lo:.0f}–{hi:.0f} s) could not place it against the "
           f"{cold.budget_s:g} s budget")
    full = all(t.get("depth") == "full" for t in deeper.timing.values())
    how = "every repeat, as --full" if full else f"{repeats(deeper)} repeats a case"
    if deeper.status == Status.INTERRUPTED:
        return cold         # stopped before it could say: the stage stays as its first measure left it
    if deeper.status != Status.OK:
        deeper.compile_step = cold.compile_step
        deeper.message = f"{deeper.message} (its timing measured again, {how}: {was})"
        return deeper
    rest = cold.charged_s - loops_s(cold)
    preds = [t.get("predicted") or {} for t in deeper.timing.values()]
    if full:
        seconds = low = high = rest + loops_s(deeper)
    else:
        seconds, low, high = (rest + sum(p.get(k, p.get("seconds", 0.0)) for p in preds)
                              for k in ("seconds", "low_s", "high_s"))
    shared = None if cold.contention.gpu_shared is None and deeper.contention.gpu_shared is None else \
        sorted({*(cold.contention.gpu_shared or []), *(deeper.contention.gpu_shared or [])})
    return dataclasses.replace(
        cold, timing=deeper.timing, predicted_s=round(seconds, 3), predicted_range=[round(low, 3), round(high, 3)],
        contention=dataclasses.replace(cold.contention, gpu_shared=shared,
                                       overlapped=sorted({*cold.contention.overlapped,
                                                          *deeper.contention.overlapped})),
        message=f"timing measured again ({how}): {was}")


def settle(st: StageResult, measure, stop=None) -> StageResult:
    """Measure further (measure(changes) -> the stage run again with those settings) while the stage is undecided."""
    for changes in LADDER:
        if not undecided(st) or (stop is not None and stop.is_set()):
            break
        st = merged(st, measure(changes))
    return st


def judge(st: StageResult) -> None:
    """A passed stage whose whole predicted range is over its budget is at risk. One still undecided (its further
    measure was stopped) says so, and no status rests on it."""
    lo, hi = st.predicted_range or (st.predicted_s, st.predicted_s)
    budget = st.budget_s
    if st.status != Status.OK or not st.predicted_s or not hi or hi <= budget:
        return
    said = (f"its first pass and its timing loops run in full come to {hi:.0f} s against the {budget:g} s budget"
            if lo == hi else f"predicted {st.predicted_s:.0f} s (95 % range {lo:.0f}–{hi:.0f} s) against the "
                             f"{budget:g} s budget, from a {repeats(st)}-repeat sample")
    if lo > budget:
        st.status, st.message = Status.AT_RISK, said
    else:
        st.message = f"inconclusive: {said}; its further measure was stopped"

