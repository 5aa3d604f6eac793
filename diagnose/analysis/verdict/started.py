"""Whether a run's worker reached the submission at all. Pure.

A stage's process first imports torch, initialises the device and loads the reference (the phases the harness's
own evaluator runs before it touches the submission: runs/harness.EVALUATOR_PHASES); only then does the
submission's import begin. A process that died, hung or failed before that (torch missing from the Python that
runs it, a device that will not start, the worker's own failure before the stage) ran none of the submission's
code: its ending says something about this machine or about diagnose, nothing about the submission. So it is
no evidence: no cause, no "not the cause" and no failure verdict rests on it (evidence.effective, summary.verdict),
and the audit rejects any that does (`reached-submission`).
"""
from __future__ import annotations

from diagnose.findings import clip
from diagnose.runs.harness import EVALUATOR_PHASES
from diagnose.session import Run, StageResult
from diagnose.status import FAILURES, Status

NEVER = "never reached the submission"     # how a run's note says so (evidence.effective)


def never_reached(st: StageResult | None) -> str | None:
    """Why this failed stage never ran the submission, or None when it did (or did not fail)."""
    if st is None or st.status not in FAILURES:
        return None
    werr = next((e for e in st.events if e.get("k") == "worker_error"), None)
    if werr is not None:     # main.py's setup raised: torch, the device, the reference, all before the submission
        msg = str(werr.get("message") or "").strip()
        said = f"{werr.get('type') or 'an error'}: {clip(msg.splitlines()[0], 200)}" if msg else str(werr.get("type"))
        return f"its worker failed {_in(st)}before the submission ran ({said})"
    if st.phase in EVALUATOR_PHASES:
        return f"its process ended {_in(st)}before the submission's import began ({st.status})"
    if not st.phases and st.status == Status.CRASH and not st.exception:
        return "its process ended before torch's import began"
    return None


def _in(st: StageResult) -> str:
    return f"in {st.phase}, " if st.phase else ""


def unstarted(run: Run | None) -> str | None:
    """Why the stage that ended this run never ran the submission: then the run proves nothing about it."""
    return never_reached(run.failed_stage) if run is not None else None
