"""What a run did, read from its record: the runtime evidence that decides whether a suspect is present.

Pure functions of a Run (and, where lines must be grouped into loops or statements, the source). The
probes decide presence from these; the static scan only locates what a toggle edits.
"""
from __future__ import annotations

import ast
import os

from diagnose.findings import clip
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


def compiled_inside_capture(run: Run | None) -> list[str]:
    """Evidence that compiled code ran inside an outer CUDA graph capture, however it was reached: a
    capture that cudagraph trees started inside the outer one, a compile or a failure of the compiler's
    own frames while the outer capture was open."""
    out = []
    for st in _stages(run):
        outer = [c for c in st.captures if c["origin"] == "outer"]
        if not outer:
            continue
        for c in st.captures:
            if c["origin"] == "inductor" and any(o["start_s"] <= c["start_s"] and (o["end_s"] is None or
                                                 c["start_s"] <= o["end_s"]) for o in outer):
                out.append(f"{st.name}: cudagraph trees captured inside the outer capture in {c['phase']}")
                break
        t0 = st.events[0]["t"] if st.events else 0
        for r in st.compile:
            t = r.get("t", 0) - t0
            if any(o["start_s"] <= t and (o["end_s"] is None or t <= o["end_s"]) for o in outer):
                out.append(f"{st.name}: a frame compiled while the outer capture was open ({r.get('co_name')})")
                break
        frames = (st.exception or {}).get("frames") or []
        open_capture = any(o["end_s"] is None for o in outer)
        if open_capture and any(f"torch{os.sep}_dynamo" in f["file"] or f"torch{os.sep}_inductor" in f["file"]
                                for f in frames):
            out.append(f"{st.name}: the capture failed inside torch.compile's own code ({clip(st.message, 120)})")
        if open_capture and st.stacks and ("torch/_dynamo" in st.stacks or "torch/_inductor" in st.stacks):
            out.append(f"{st.name}: stopped inside torch.compile's code while the outer capture was open")
    return out


def outer_captures(run: Run | None) -> int:
    return sum(1 for st in _stages(run) for c in st.captures if c["origin"] == "outer")


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
