"""What a run did, read from its record: the runtime evidence that decides whether a suspect is present.

Pure functions of a Run (and, where lines must be grouped into loops or statements, the source). The
probes decide presence from these; the static scan only locates what a toggle edits.
"""
from __future__ import annotations

import ast
import os

from diagnose.session import Run, StageResult
from diagnose.status import Status

SUB = "submission.py"


def _mine(path: str | None) -> bool:
    return bool(path) and os.path.basename(path) == SUB


def _stages(run: Run | None) -> list[StageResult]:
    return [s for s in (run.stages if run else []) if s.status != Status.SKIPPED]


def compile_calls(run: Run | None) -> list[dict]:
    """torch.compile calls the submission made (a decorator, a call, a lazy compile, model.compile()),
    one per call site, with its options."""
    out, seen = [], set()
    for st in _stages(run):
        for c in st.compile_calls:
            if not _mine(c.get("caller_file")):
                continue
            key = (c.get("caller_line"), c.get("target"))
            if key not in seen:
                seen.add(key)
                out.append({**c, "stage": st.name})
    return out


def frames_compiled(run: Run | None) -> bool:
    """Did torch.compile compile anything in the run's stages (not merely wrap a function)?"""
    return any(st.compile for st in _stages(run))


def compiled(run: Run | None) -> bool:
    return any(st.compile for st in _stages(run)) or bool(compile_calls(run))


def inductor_settings(run: Run | None) -> dict:
    """The last Inductor settings a run compiled with (max_autotune, triton.cudagraphs, ...)."""
    last = {}
    for st in _stages(run):
        for e in st.events:
            if e["k"] == "inductor_config" and isinstance(e.get("settings"), dict):
                last = e["settings"]
    return last


def samples(st: StageResult, phase_prefix: str, kind: str = "lines") -> dict[int, int]:
    out: dict[int, int] = {}
    for phase, kinds in st.samples.items():
        if phase.startswith(phase_prefix):
            for line, n in kinds.get(kind, {}).items():
                out[int(line)] = out.get(int(line), 0) + n
    return out


def loop_iterations(run: Run | None, phase_prefix: str = "") -> dict[int, int]:
    out: dict[int, int] = {}
    for st in _stages(run):
        for phase, counts in st.loops.items():
            if phase.startswith(phase_prefix) or phase == "None" and not phase_prefix:
                for line, n in counts.items():
                    out[int(line)] = out.get(int(line), 0) + n
    return out


def loops(source: str) -> list[tuple[int, int]]:
    """(header, last line) of every loop in the source, a comprehension's too ([work() for _ in range(n)])."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, ValueError):
        return []
    return [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (
        ast.For, ast.While, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))]


def repeated_work(run: Run | None, source: str, min_share: float = 0.2) -> list[dict]:
    """Loops that repeated work before a shape's first result: during first_call phases (and the import,
    where a warmup may run), a loop whose lines hold at least `min_share` of the phase's samples, with
    its iterations where they were counted."""
    out: dict[int, dict] = {}
    iters = loop_iterations(run)
    for st in _stages(run):
        for phase in st.samples:
            if not (phase.startswith("first_call:") or phase == "submission_import"):
                continue
            lines = {int(k): v for k, v in st.samples[phase].get("lines", {}).items()}
            lines_entry = {int(k): v for k, v in st.samples[phase].get("entries", {}).items()}
            stack = {int(k): v for k, v in st.samples[phase].get("stack", {}).items()}
            total = sum(lines.values())
            if not total:
                continue
            for head, last in loops(source):
                inside = sum(n for ln, n in lines.items() if head <= ln <= last)
                inside = max(inside, sum(n for ln, n in lines_entry.items() if head <= ln <= last))
                # inclusive: the loop's own lines on the stack, wherever the time below them went (a
                # helper the loop calls, a function it was handed)
                inside = max(inside, max((n for ln, n in stack.items() if head <= ln <= last), default=0))
                if inside / total >= min_share:
                    e = out.setdefault(head, {"line": head, "seconds": 0.0, "phases": [],
                                              "iterations": iters.get(head)})
                    e["seconds"] += inside * (st.sample_interval_s or 0.01)
                    e["phases"].append(f"{st.name}/{phase}")
    return sorted(out.values(), key=lambda e: -e["seconds"])


def import_time_by_statement(run: Run | None) -> dict[int, float]:
    """Seconds of import time per module-level statement (the line of the statement being executed)."""
    out: dict[int, float] = {}
    for st in _stages(run):
        for line, n in samples(st, "submission_import", "module").items():
            out[line] = out.get(line, 0.0) + n * (st.sample_interval_s or 0.01)
        if out:
            return out       # one stage's import says it; later stages repeat it
    return out


def line_seconds(run: Run | None, line: int) -> list[tuple[str, float, bool]]:
    """Seconds a run spent with this submission line on its stack, per first call (and the import): (phase,
    seconds, whether the phase ended) for each phase that had it. A loop header's line holds its count expression
    (a call that works out the count), while its passes run on the lines below."""
    out = []
    for st in _stages(run):
        ended = {p.name: not p.open for p in st.phases}
        for phase, kinds in st.samples.items():
            n = (kinds.get("stack") or {}).get(str(line), 0)
            if n and (phase.startswith("first_call:") or phase == "submission_import"):
                out.append((phase, n * (st.sample_interval_s or 0.01), ended.get(phase, False)))
    return out


def deadline_cut(st: StageResult | None) -> bool:
    """Did the step's own deadline stop it (not a crash, a dead pool worker, a stop or a memory limit)?"""
    return st is not None and st.status == Status.TIMEOUT and st.killed == "deadline"


def cut_by(st: StageResult | None) -> str:
    """What ended a step while work in it was still open, in words: "the deadline" only where its deadline stopped
    it (deadline_cut, which the audit re-derives from the same record)."""
    if st is None:
        return "the run's end"
    if deadline_cut(st):
        return "the deadline"
    if st.lost_worker:
        return "its pool worker's death"
    if st.status == Status.INTERRUPTED or st.killed == "interrupted":
        return "the stop"
    if st.killed == "max_rss":
        return "the memory limit"
    return "the crash" if st.status == Status.CRASH else f"the stage's end ({st.status})"


def last_stage(run: Run | None) -> StageResult | None:
    """The stage that ended the run, else the last that ran: where work still open at the run's end was."""
    ran = _stages(run)
    return (run.failed_stage if run is not None else None) or (ran[-1] if ran else None)


def unfinished(run: Run | None, recs: list[dict]) -> str:
    """", the last ..." for records of searches ({done, error, stage?}, in the order they ran) where one did not
    finish: the error it ended in, else what cut it off (cut_by its stage); "" where every one finished."""
    left = [r for r in recs if not r.get("done")]
    if not left:
        return ""
    last = left[-1]
    if last.get("error"):
        return f", the last ended in {str(last['error']).split(':')[0]}"
    st = run.stage(last["stage"]) if run is not None and last.get("stage") else last_stage(run)
    return f", the last cut off by {cut_by(st)}"
