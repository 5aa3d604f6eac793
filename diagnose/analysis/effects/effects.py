"""What a toggle changed in its run, measured against the baseline's run: the evidence that a variant ran
"without the suspect". Pure functions of the session.

A toggle is not trusted to do what its label says. Each probe names in its INFO what its toggle takes away
(`takes_away`), and this module measures that in both runs:

- lines     the time the baseline spent in the statements the toggle edits (a warmup loop, a search, work at
            import), from the sampler's inclusive line counts, against the time the variant spent in the same
            statements, wherever they now stand: a statement the edit moved (work deferred into the first call)
            is found again by its text, and its time counts as moved, not removed;
- compile   the submission's torch.compile calls (their mode, fullgraph, dynamic, options) and recompiles;
- measure   the probe's own measure of its own evidence (its `measure(base, run)` hook: an outer CUDA graph
            capture and compiled code run inside one; the numeric settings the submission computed under);
- records   what the library records say it tuned or built, and for how long (the probe's own, read from its
            facts by its `records` hook);
- switch    a runtime switch (a warm container): the compile time it should save.

An Effect says whether the baseline reached the suspect's work at all, whether the variant's run took it away,
and what else the edit changed (another statement whose time fell, outside the suspect's phase). A variant
identical to the submission changed nothing. The bisector clears a suspect, and credits it with a fix, only on a
toggle that acted; the audit re-derives the same.
"""
from __future__ import annotations

from dataclasses import replace

from diagnose.analysis.effects.effect_calls import (
    compile_effect,
    library_effect,
    switch_effect,
)
from diagnose.analysis.effects.effect_lines import line_map, lines_effect, suspect_spans
from diagnose.analysis.effects.effect_record import Effect
from diagnose.facts.observed import loops
from diagnose.runs.runner.sites import submission_lines
from diagnose.session import Run, Session
from diagnose.status import Status
from probes import door

__all__ = ["Effect", "credit", "effect", "one_suspect", "same_place"]


def effect(session: Session, base: Run, run: Run) -> Effect:
    """What run's toggle changed against the baseline, by what its probe says the toggle takes away."""
    if run.source_sha == base.source_sha and not run.switches:
        return Effect(None, False, f"{run.id} ran the submission unchanged", identical=True)
    probe = run.probe if door.known(run.probe) else None
    measure = MEASURES.get(door.info(probe).takes_away if probe is not None else None)
    if measure is None:
        return Effect(None, None, "its probe names no measure of what its toggle takes away")
    return measure(session, base, run, probe)


# What a toggle takes away (ProbeInfo.takes_away) -> how it is measured: (session, base, run, its probe) -> Effect
MEASURES = {
    "lines": lambda session, base, run, probe: _took(probe, base, run, _got_past(
        session, base, run, lines_effect(session, base, run, door.info(probe).sites))),
    # the compile calls' settings the probes' toggles set (COMPILE_KWARGS), and what they count (count, COUNTS)
    "compile": lambda session, base, run, probe: compile_effect(
        base, run, {k for ks in door.values("COMPILE_KWARGS") for k in ks},
        [(door.of(p, "count"), door.value(p, "COUNTS")) for p in door.implementing("count")
         if door.info(p).takes_away == "compile"]),
    # the probe measures its own evidence (its `measure` hook): (reached, removed, what)
    "measure": lambda session, base, run, probe: Effect(*door.ask(probe, "measure", base=base, run=run)),
    # the probe's own records, read from its facts (its `records` hook), in its words (RECORDS)
    "records": lambda session, base, run, probe: library_effect(base, run, door.of(probe, "records"),
                                                                door.value(probe, "RECORDS")),
    "switch": lambda session, base, run, probe: switch_effect(base, run, [door.of(p, "records")
                                                                        for p in door.value(probe, "SAVES")]),
}


def _took(probe: str, base: Run, run: Run, e: Effect) -> Effect:
    """A probe that can see its suspect's work in the run itself (`took(base, run)`: the search probe's hook saw
    candidates timed) overrides the time measure: a run that still did the work did not take the toggle, however
    its time fell; one that shows the work gone took it, where the time measure could not say."""
    verdict = door.ask(probe, "took", base=base, run=run)
    if verdict is None or e.identical:
        return e
    gone, what = verdict     # given only where the baseline's own run did the work: reached, whatever sampled it
    if not gone:
        return replace(e, reached=True, removed=False, moved=False, what=f"{what}; {e.what}")
    # seen gone from the run itself (a thread's search the sampler of the main thread never sees): taken away
    return replace(e, reached=True, removed=True, what=f"{what}; {e.what}")


def _chain(session: Session, run: Run) -> list[int]:
    """The failing stack's submission lines, in the baseline's numbering (a line the edit moved, by its text)."""
    st = run.failed_stage
    file = (st.site or {}).get("file") if st else None
    if not file:
        return []
    lines = submission_lines(st.stacks, (st.exception or {}).get("frames"), file) or [st.site["line"]]
    if not run.variant:
        return lines
    lm = line_map(run.variant, len((session.submission.get("source") or "").splitlines()))
    return [lm.back(ln) or -ln for ln in lines]


def _got_past(session: Session, base: Run, run: Run, e: Effect) -> Effect:
    """A baseline the deadline stopped inside the suspect's statements measured only a part of their time: a
    variant that got past them, where the baseline never did, took them away even if it spent as long as that part
    in them (N->3 after a cut-off N=30)."""
    b, r = _chain(session, base), _chain(session, run) if run.failed_stage else []
    st = base.failed_stage
    if e.removed is not False or e.moved or not b or st is None or st.status != Status.TIMEOUT:
        return e
    spans = suspect_spans(session, run, door.info(run.probe).sites)
    inside = [sp for sp in spans if any(sp[0] <= x <= sp[1] for x in b)]     # a helper's loop too
    # the variant finished the very phase (the same shape's first call) the deadline cut in the baseline
    same = run.stage(st.name)
    finished = same is not None and any(p.name == st.phase and not p.open for p in same.phases)
    if not inside or (not finished and any(x > 0 and inside[0][0] <= x <= inside[0][1] for x in r)):
        return e
    return replace(e, removed=True, what=f"{e.what}; {base.id} was still inside L{inside[0][0]} at its deadline in "
                                         f"{st.phase}, {run.id} got past it there")


def _anchor(source: str, line: int) -> int:
    """Where a timeout stands: the loop that holds the line (its header), else the line itself. A deadline lands on
    any line of a loop's body; which loop it was is what tells one piece of work from another."""
    held = [(a, b) for a, b in loops(source) if a <= line <= b]
    return min(held, key=lambda s: s[1] - s[0])[0] if held else line


def same_place(session: Session, base: Run, run: Run) -> str | None:
    """Where the variant's failure stands against the baseline's, by the submission's lines on the failing
    stack: None where both failed at the same place (or neither names one), else a sentence saying where each
    failed. A crash is placed by its whole chain of submission lines; a timeout by the loop (or line) of the
    outermost submission frame the deadline found, so a warmup and a search that both call one helper that
    burns time are two places."""
    b, r = _chain(session, base), _chain(session, run)
    if not b or not r:
        return None
    bst, rst = base.failed_stage, run.failed_stage
    if bst.status == Status.TIMEOUT and rst.status == Status.TIMEOUT:
        src = session.submission.get("source") or ""
        if r[0] > 0 and _anchor(src, b[0]) == _anchor(src, r[0]):
            # the same loop, but at a later shape's first call: the toggle cut it, and it still ran out there
            return None if rst.phase == bst.phase else (
                f"{run.id} ran out in the same loop (L{_anchor(src, b[0])}) only later, in {rst.phase}, not in "
                f"{bst.phase} where {base.id} did")
    elif b == r:
        return None

    def said(st, chain) -> str:
        code = (st.site or {}).get("code", "").strip()
        return f"L{'/L'.join(str(abs(x)) for x in chain)}" + (f" (`{code}`)" if code else "")
    return f"{run.id} failed at {said(rst, r)}, not where {base.id} failed ({said(bst, b)}): it failed on something " \
        "else"


def _spans(session: Session, run: Run) -> set[int]:
    if not door.known(run.probe) or door.info(run.probe).takes_away != "lines" or not run.variant:
        return set()
    return {ln for a, b in suspect_spans(session, run, door.info(run.probe).sites) for ln in range(a, b + 1)}


def one_suspect(session: Session, runs: list[Run]) -> dict[str, str]:
    """Probes whose toggles act on the same statement as another probe's are one suspect: {probe: the probe it
    yields to} (a timed loop that stores its choice is a search, and the warmup probe's cut of it is the same
    edit under another name). Never an interaction of the two."""
    out: dict[str, str] = {}
    for a in runs:
        owners = door.info(a.probe).yields_to if door.known(a.probe) else ()
        for b in runs:
            if b.probe in owners and _spans(session, a) & _spans(session, b):
                out[a.probe] = b.probe
    return out


def credit(session: Session, base: Run, run: Run) -> str | None:
    """Why a variant that got past the failure cannot be credited to its suspect, or None when it can: it must
    have changed the run, in work the baseline reached, and not left that work as it was."""
    e = effect(session, base, run)
    if e.identical or e.reached is False or e.removed is False:
        return e.why_not()
    return None
