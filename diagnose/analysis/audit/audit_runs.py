"""Audit rules that read one run's own record: a stage's judgement re-derived from how its process ended,
conclusions resting on a run that read this machine's state or that never reached the submission, and timing
judgments resting on a stage that shared its GPU. Pure: each finding is (rule, claim, missing), which audit.py
reports with the others."""
from __future__ import annotations

import re

from diagnose.analysis.audit.claims import cleared_key
from diagnose.analysis.causes.unfixed import stage_cases
from diagnose.analysis.verdict.carried import depends_on_machine
from diagnose.analysis.verdict.evidence import confirmations, loaded, measured_alone, sharers
from diagnose.analysis.verdict.started import unstarted
from diagnose.analysis.verdict.too_far import how_far
from diagnose.runs.harness import in_pool_worker
from diagnose.session import Session, StageResult
from diagnose.status import TIME_BASED, Status

SAYS_NOTHING = (Status.INCOMPLETE, Status.INTERRUPTED, Status.NEEDS_GPU)


def _died(st: StageResult) -> str | None:
    """How the stage's process died without finishing, from its raw end: an exception the evaluator's pool does
    not hand back, a signal, or an exit code before any 'stage done'. None when it did not, or when we ended it."""
    if st.killed:
        return None
    exc = next((e for e in st.events if e.get("k") == "exception"), None)
    if exc is not None:     # an Exception the pool hands back ends our worker with exit code 1: no death
        return (exc.get("type") or "an exception") if exc.get("escapes") is True else None
    if st.signal:
        return f"signal {st.signal}"
    done = any(e.get("k") == "stage_done" for e in st.events)
    return f"exit code {st.exit_code}" if st.exit_code not in (0, None) and not done else None


def lost_workers(s: Session, claims: list) -> list[tuple[str, str, str]]:
    """lost-worker: a stage judged a timeout because its pool worker died ran the built-in evaluator, in a phase
    of its pool worker, and its process died there; a stage whose pool worker died that way is judged so, not a
    crash. Found under every claim that rests on the stage's run."""
    evaluated, out = bool(s.task.get("evaluator")), []
    which = "its own" if evaluated else "the built-in"
    for r in s.runs:
        keys = [c.key for c in claims if r.id in c.runs and "lost-worker" in c.rules]
        if not keys:
            continue    # no printed claim rests on this run
        for st in r.stages:
            died, lost = _died(st), st.lost_worker
            if lost and not (st.status == Status.TIMEOUT and died
                             and in_pool_worker(st.name, lost.get("phase"), evaluated)):
                missing = (f"{r.id} {st.name} is judged a timeout from a dead pool worker, but its process "
                           f"{'died ' + died if died else 'did not die'} in {lost.get('phase')} ({which} evaluator)")
            elif not lost and st.status == Status.CRASH and died and in_pool_worker(st.name, st.phase, evaluated):
                missing = (f"{died} ended {r.id}'s pool worker in {st.name} ({st.phase}): the harness's pool never "
                           f"answers that task, so the stage times out, not crashes")
            else:
                continue
            out += [("lost-worker", key, missing) for key in keys]
    return out


def outside(s: Session) -> list[tuple[str, str, str]]:
    """outside-state: OK, a verified fix and 'not the cause' never rest on a run that read this machine's state."""
    out = []
    said = [("verdict", s.verdict.runs if s.verdict.status == Status.OK else [])]
    said += [("fix", [s.fix.run] if s.fix else [])] + [(cleared_key(c.probe), c.evidence) for c in s.cleared]
    for key, runs in said:
        for r in (s.run(x) for x in runs):
            machine = depends_on_machine(r)
            if machine:
                out.append(("outside-state", key, f"{r.id} depends on {machine}, read from outside its container"))
    return out


def unreached(s: Session, claims: list) -> list[tuple[str, str, str]]:
    """reached-submission: no cause, "not the cause", fix or failure verdict rests on a run whose worker never
    reached the submission (started.py): its ending says nothing about the submission's code. A verdict that says
    nothing can be concluded (inconclusive, interrupted, needs a GPU) may name such a run: it says why."""
    out = []
    for c in claims:
        if "reached-submission" not in c.rules or c.kind == "verdict" and s.verdict.status in SAYS_NOTHING:
            continue
        for r in (s.run(x) for x in c.runs):
            why = unstarted(r)
            if why:
                out.append(("reached-submission", c.key, f"{r.id} never reached the submission: {why}"))
    return out


# The sentences that judge a stage's time against its budget, as too_far.py and evidence.thin word them
_HOW_FAR = re.compile(r"(\S+) needs about ([\d.]+)× its \S+ s budget|(\S+) ran out [\d.]+ s into its first shape's")
_THIN = re.compile(r"(\S+) passed in [\d.]+ s of \S+ s, [\d.]+ s to spare, within the")


def _alone(s: Session, runs: list, name: str, ok) -> bool:
    """Did one of these runs, or a solo rerun of one, measure stage `name` with no other run on its GPU, and
    does that measure bear the judgment (`ok(stage)`)?"""
    every = runs + [c for r in runs for c in confirmations(s, r)]
    return any(st.name == name and measured_alone(r, st) and ok(st) for r in every for st in r.stages)


def _shared(s: Session, runs: list, name: str) -> str:
    stages = [st for r in runs for st in r.stages if st.name == name]
    n = max((len(sharers(st)) for st in stages), default=0)
    lost = max((st.contention.interference_s for st in stages if loaded(st)), default=0.0)
    beside = f"while other work took {lost:.1f} s of its CPU time" if lost and not n else \
        f"beside {n} other run(s) on its GPU"
    return f"{name} was measured {beside}, and no solo rerun measured it"


def timing_solo(s: Session, claims: list) -> list[tuple[str, str, str]]:
    """timing-solo: at risk, 'needs N× its budget' and a pass within the noise of its budget are stated only from
    a stage measured with no other run on its GPU (the run's own, or its solo rerun's)."""
    out = []
    for c in claims:
        if "timing-solo" not in c.rules:
            continue
        # the claim's runs, and a solo rerun its sentence names as where the stage was measured alone
        named = re.findall(r"\(alone on (?:its GPU|the CPU), in (\w+)\)", c.text)
        runs = [r for r in map(s.run, [*c.runs, *named]) if r is not None]
        for m in _HOW_FAR.finditer(c.text):
            name, times = m.group(1) or m.group(3), m.group(2)
            said = f"{name} needs about {times}×" if times else f"{name} ran out"
            if not _alone(s, runs, name, lambda st, said=said: st.status in TIME_BASED and said in (
                    how_far(st, stage_cases(s, st.name)) or "")):
                out.append(("timing-solo", c.key, f"it says how far over its budget {name} is, but " +
                            _shared(s, runs, name)))
        for name in _THIN.findall(c.text):
            if not _alone(s, runs, name, lambda st: st.status == Status.OK):
                out.append(("timing-solo", c.key, f"it says {name} passed within the noise of its budget, but " +
                            _shared(s, runs, name)))
        v = s.verdict
        if c.kind == "verdict" and v.status == Status.AT_RISK and not _alone(
                s, runs, v.stage, lambda st: st.status == Status.AT_RISK):
            out.append(("timing-solo", c.key, "it says at risk, but " + _shared(s, runs, v.stage)))
    return out
