"""Audit rules that read one run's own record: a stage's judgement re-derived from how its process ended, and
conclusions resting on a run that read this machine's state. Pure: each finding is (rule, claim, missing), which
audit.py reports with the others."""
from __future__ import annotations

from diagnose.analysis.carried import depends_on_machine
from diagnose.analysis.claims import cleared_key
from diagnose.runs.harness import in_pool_worker
from diagnose.session import Session, StageResult
from diagnose.status import Status


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
