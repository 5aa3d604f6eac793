"""The verdict the submission cannot write. A judged stage's own account (the worker's events, an evaluator's report)
comes from the submission's process, where the check can be replaced, patched or skipped and the tool's channel
found. So every output checked there leaves that process (worker/outputs.py keeps it in the stage's outputs folder,
with the arguments that made its input), and after the stage a verifier (worker/verify.py), started like every
step and in the same jail, judges each one again with a pristine copy of the problem's files, in a process that
never ran the submission. The stage stays ok only if its own account is ok and the verifier judged every output
the stage had to keep, each one kept, ok (decide).
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from diagnose.runs import harness
from diagnose.runs.protocol import VerifySpec
from diagnose.runs.runner.child import ChildResult, Limits
from diagnose.runs.runner.container import OUTPUTS_DIR, Container
from diagnose.runs.runner.isolate import run_child
from diagnose.session import StageResult
from diagnose.status import Status
from diagnose.tasks.loader import SUBMISSION, Task, labels, stage_cases, stage_files

VERIFY_BUDGET_S = 120.0    # a torch import, the reference, and each kept output's input made and checked again
PASSED = "the evaluator in the submission's process passed it"
MULTI_GPU = "not verified: a multi-GPU problem's check needs its ranks' process group, which a verifier cannot rebuild"


def _remove(path: Path) -> None:
    """Gone, whatever is there (a link a run planted included: removed, never followed)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def outputs_dir(box: Container, tag: str) -> Path:
    """Where a stage's processes keep the outputs they check: a new folder, under a name nothing of the run's could
    have put in its place beforehand (it is removed once they are judged)."""
    return Path(tempfile.mkdtemp(prefix=f"{tag}.", dir=box.root / OUTPUTS_DIR))


def expected_outputs(task: dict, stage: str, evaluated: bool) -> list[dict]:
    """Every output a stage must keep, {case, index, kwargs, match}: each test case's; a benchmark case's first and
    last of its 50 (harness.KEPT); under a problem's own evaluator, the first checked on each case, which in its
    benchmarks may be seeded its own way (match "shape": any seed of the case's shape, made again with that seed)."""
    cases = stage_cases(task, stage)
    kept = (0,) if stage == "test" or evaluated else harness.KEPT
    match = "shape" if evaluated and stage != "test" else "exact"
    return [{"case": label, "index": i, "kwargs": harness.input_kwargs(case, i), "match": match}
            for label, case in zip(labels(cases), cases, strict=True) for i in kept]


def _pristine(task: Task, box: Container, tag: str) -> Path:
    """The problem's files as its folder has them now (never the run's work/, which the submission may have
    rewritten), without the submission: in a new folder of the tool's own."""
    folder = Path(tempfile.mkdtemp(prefix=f"{tag}.verify.", dir=box.tool))
    folder.chmod(0o755)      # the verifier runs as the run's own user (nobody, where the tool is root): it reads them
    skip = {"submission.py", *(n for n, src in task.files if src == SUBMISSION)}
    for name, data in stage_files(task, "").items():
        if name not in skip:
            (folder / name).write_bytes(data)
    return folder


def verify_stage(st: StageResult, task: Task, stage: str, evaluated: bool, box: Container, env: dict,
                 jail: dict | None, outputs: Path, arbiter=None, stop=None, owner: str = "") -> None:
    """After a judged stage: where its own account is ok, run the verifier on what it kept (`outputs`), then decide;
    then remove what it kept. Raises where the verifier's jail failed (the tool's failure, never the submission's
    outcome)."""
    try:
        if st.status != Status.OK:
            return
        if task.world_size > 1:
            st.verified = {"skipped": MULTI_GPU}
            return
        expected = expected_outputs(task.to_dict(), stage, evaluated)
        child = _verifier(task, stage, box, env, jail, outputs, expected, arbiter, stop, owner)
    finally:
        _remove(outputs)
    if (child.jail or {}).get("error"):
        raise RuntimeError(f"the verifier's jail failed ({child.jail['error']})")
    if child.killed == "interrupted":
        st.status, st.message = Status.INTERRUPTED, "interrupted by the user while its outputs were verified"
        return
    decide(st, expected, child.events, child.wall_s, failure_of(child))


def _verifier(task: Task, stage: str, box: Container, env: dict, jail: dict | None, outputs: Path,
              expected: list[dict], arbiter, stop, owner: str) -> ChildResult:
    """The verifier's process, started as every step is, in the same jail, in a copy of the problem's files."""
    folder = _pristine(task, box, stage)
    spec = Path(f"{folder}.json")
    spec.write_text(VerifySpec(str(folder), str(outputs), expected).to_json())
    try:
        return run_child([sys.executable, "-s", "-m", "diagnose.runs.worker.verify", str(spec)], cwd=str(folder),
                         env=env, stacks_path=f"{folder}.stacks.txt",
                         limits=Limits(VERIFY_BUDGET_S, None), arbiter=arbiter, owner=owner, stop=stop, jail=jail)
    finally:
        _remove(folder)


def failure_of(child: ChildResult) -> str | None:
    """How the verifier failed to judge everything, or None when it said it was done."""
    if child.killed:
        return f"was stopped ({child.killed}) after {child.wall_s:.0f} s"
    if any(e["k"] == "verify_done" for e in child.events):
        return None
    how = f"signal {child.signal}" if child.signal else f"exit code {child.exit_code}"
    last = (child.stderr_tail.strip().splitlines() or [""])[-1].strip()
    return f"ended ({how}) before it had judged every output" + (f": {last[:300]}" if last else "")


def _at(e: dict) -> str:
    return f"{e['case']} (output {e['index']})"


def decide(st: StageResult, expected: list[dict], events: list[dict], wall_s: float,
           failure: str | None = None) -> None:
    """The parent's decision, from the verifier's events: what it judged goes on the stage's record (with its cost,
    per case), and a stage whose own account is ok stays ok only if every expected output was kept and judged ok.
    Otherwise: WRONG where an output is wrong, TAMPERED where one never left the submission's process, CRASH where
    the verifier could not judge them all."""
    got = {(e["case"], e["index"]): e for e in events if e.get("k") == "verified"}
    cases: dict[str, dict] = {}
    for e in got.values():
        c = cases.setdefault(e["case"], {"outputs": 0, "ms": 0.0})
        c["outputs"] += e["outputs"] if isinstance(e.get("outputs"), int) else 0
        c["ms"] = round(c["ms"] + (e["ms"] if isinstance(e.get("ms"), (int, float)) else 0.0), 3)
    wrong = [e for e in got.values() if not e["ok"] and not e.get("missing")]
    missing = [w for w in expected if got.get((w["case"], w["index"]), {}).get("missing")]
    unjudged = [w for w in expected if (w["case"], w["index"]) not in got]
    st.verified = {"wall_s": round(wall_s, 3), "expected": len(expected), "cases": cases,
                   "outputs": sum(c["outputs"] for c in cases.values()),
                   "wrong": [{"case": e["case"], "index": e["index"], "message": str(e.get("message", ""))[:500]}
                             for e in wrong[:5]],
                   "missing": [{"case": w["case"], "index": w["index"]} for w in missing[:10]],
                   "unjudged": len(unjudged), "failure": failure}
    if st.status != Status.OK:
        return
    if wrong:
        e = wrong[0]
        st.status, st.phase = Status.WRONG, f"check:{e['case']}"
        st.message = (f"{PASSED}; the outputs are wrong: check failed on {_at(e)} in a process that never ran the "
                      f"submission: {str(e.get('message', ''))[:1500]}")
    elif missing:
        st.status, st.phase = Status.TAMPERED, None
        st.message = (f"{PASSED}, but {len(missing)} of its {len(expected)} checked outputs never left that process "
                      f"(the first: {_at(missing[0])}): it ended, or the code that keeps each checked output was "
                      f"bypassed, before they were kept")
    elif unjudged:
        st.status, st.phase = Status.CRASH, "verify"
        st.message = f"{PASSED}, but its outputs could not be verified: the verifier {failure or 'judged only some'}"
