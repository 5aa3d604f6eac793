"""The graph_capture probe's facts, read back from its hook's events (hook.py) in each step's
probe_facts["graph_capture"]: one record per capture {origin, phase, start_s, end_s}, seconds into the step, in the
order they ended, then those still open when the step's process ended (end_s None). A session of schema 4 or
before kept the same records in StageResult.captures: they come back lifted, as {event: "capture", ...}."""
from __future__ import annotations

import os

from diagnose.findings import clip
from diagnose.session import Run, StageResult
from diagnose.status import Status

NAME = "graph_capture"
_LIFTED = "capture"     # session.LIFTED's event for an old StageResult.captures record


def step_captures(step: StageResult | None) -> list[dict]:
    """Every capture of one step: begins and ends paired innermost first, across the step's processes as they
    arrived (the order the runner kept them in)."""
    recs = ((step.probe_facts or {}).get(NAME) or []) if step is not None else []
    out, open_ = [], []
    t0 = step.start_t if step is not None else None
    for r in recs:
        event = r.get("event")
        if event == _LIFTED:
            out.append({k: v for k, v in r.items() if k != "event"})
        elif event == "begin" and isinstance(r.get("origin"), str):    # the child's claims: one without is dropped
            open_.append(r)
        elif event == "end" and open_:
            b = open_.pop()
            out.append({"origin": b["origin"], "phase": b.get("phase"), "start_s": b["t"] - t0,
                        "end_s": r["t"] - t0})
    out += [{"origin": b["origin"], "phase": b.get("phase"), "start_s": b["t"] - t0, "end_s": None} for b in open_]
    return out


def _stages(run: Run | None) -> list[StageResult]:
    return [s for s in (run.stages if run else []) if s.status != Status.SKIPPED]


def outer(step: StageResult | None) -> list[dict]:
    """The captures the submission itself started (not cudagraph trees')."""
    return [c for c in step_captures(step) if c["origin"] == "outer"]


def outer_captures(run: Run | None) -> int:
    return sum(len(outer(st)) for st in _stages(run))


def compiled_inside_capture(run: Run | None) -> list[str]:
    """Evidence that compiled code ran inside an outer CUDA graph capture, however it was reached: a
    capture that cudagraph trees started inside the outer one, a compile or a failure of the compiler's
    own frames while the outer capture was open."""
    out = []
    for st in _stages(run):
        caps = step_captures(st)
        outer_ = [c for c in caps if c["origin"] == "outer"]
        if not outer_:
            continue
        for c in caps:
            if c["origin"] == "inductor" and any(o["start_s"] <= c["start_s"] and (o["end_s"] is None or
                                                 c["start_s"] <= o["end_s"]) for o in outer_):
                out.append(f"{st.name}: cudagraph trees captured inside the outer capture in {c['phase']}")
                break
        t0 = st.events[0]["t"] if st.events else 0
        for r in st.compile:
            t = r.get("t", 0) - t0
            if any(o["start_s"] <= t and (o["end_s"] is None or t <= o["end_s"]) for o in outer_):
                out.append(f"{st.name}: a frame compiled while the outer capture was open ({r.get('co_name')})")
                break
        frames = (st.exception or {}).get("frames") or []
        open_capture = any(o["end_s"] is None for o in outer_)
        if open_capture and any(f"torch{os.sep}_dynamo" in f["file"] or f"torch{os.sep}_inductor" in f["file"]
                                for f in frames):
            out.append(f"{st.name}: the capture failed inside torch.compile's own code ({clip(st.message, 120)})")
        if open_capture and st.stacks and ("torch/_dynamo" in st.stacks or "torch/_inductor" in st.stacks):
            out.append(f"{st.name}: stopped inside torch.compile's code while the outer capture was open")
    return out


def _compiled_inside(run: Run) -> bool:
    """Compiled code ran inside an outer capture: the record says so, or the run failed inside torch.compile's
    own frames in a phase that opened an outer capture."""
    if compiled_inside_capture(run):
        return True
    st = run.failed_stage
    if st is None or not any(c.get("phase") == st.phase for c in outer(st)):
        return False
    files = [f.get("file", "") for f in (st.exception or {}).get("frames") or []]
    return any("torch/_inductor" in f or "torch/_dynamo" in f for f in files) or \
        "torch/_inductor" in (st.stacks or "") or "torch/_dynamo" in (st.stacks or "")


def measure(base: Run, run: Run) -> tuple[bool, bool, str]:
    """What its toggle took away (analysis/effects/effects.py, INFO.takes_away "measure"): the outer captures, or
    compiled code inside one. (reached, removed, what)."""
    nb, nv = outer_captures(base), outer_captures(run)
    ib, iv = _compiled_inside(base), _compiled_inside(run)
    if not nb:
        return False, False, f"{base.id} made no outer CUDA graph capture"
    what = (f"outer captures {nb} in {base.id}, {nv} in {run.id}; compiled code inside one: "
            f"{'yes' if ib else 'no'} -> {'yes' if iv else 'no'}")
    return True, nv == 0 or (ib and not iv), what


def spans(step: StageResult) -> list[dict]:
    """Each capture of one step as a span: the trace draws them all; an outer one is the suspect's own work, whose
    time counts as capturing (the first call's split, the evidence table)."""
    return [{"name": f"capture ({c['origin']})", "phase": c.get("phase"), "start_s": c["start_s"],
             "end_s": c["end_s"], "own": c["origin"] == "outer"} for c in step_captures(step)]
