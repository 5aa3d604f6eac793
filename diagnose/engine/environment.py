"""The session's header, lifted from what the runs said about the machine: torch and the GPU (the first run's env
event), the L2 flush, the walls each run's container had and what a run tried beyond them. Lifted again before every
settle of the session (engine/conclusions.py), so every copy written says what the runs so far said.
"""
from __future__ import annotations


def lift(session) -> None:
    """Lift what the runs said about the machine (torch, GPU, the L2 flush) into the session's header."""
    walls = next((st.state["container"] for r in session.runs for s in r.stages
                  for st in (s.compile_step, s) if st is not None and st.state.get("container")), None)
    if walls:
        session.harness.setdefault("container", {})["walls"] = walls
    tried = sorted({x for r in session.runs for s in r.stages for st in (s.compile_step, s) if st is not None
                    for x in _tried(st)})
    if tried:       # what a run tried beyond its walls (each held, or the walls' record says it was missing)
        session.harness.setdefault("container", {})["tried"] = tried[:30]
    events = [e for r in session.runs for s in r.stages for e in s.events if e["k"] in ("env", "flush")]
    env = next((e for e in events if e["k"] == "env"), None)
    if env:
        session.environment = {k: v for k, v in env.items() if k not in ("k", "t", "pid")}
    flushes = [e for e in events if e["k"] == "flush"]
    if flushes:
        lo, want = min(e["bytes"] for e in flushes), flushes[0]["wanted"]
        hi = max(e["bytes"] for e in flushes)
        session.harness["flush"] = "none (CPU)" if flushes[0].get("device") == "cpu" else (
            f"{lo / 2**30:.1f}–{hi / 2**30:.1f} GiB per repeat" +
            (f", scaled down from the harness's {want / 2**30:.1f} GiB to fit the device's free memory"
             if lo < want else ""))


def _tried(st) -> list[str]:
    """What a step tried beyond its run: a signal to its parent, its group or every process, a connect (each as the
    worker's audit hook worded it: runs/worker/state.py), and every file it opened outside its container that this
    machine does not lend every run (the system's, the Python installation's and the tool's are lent), by path."""
    outside = [f"{o['op']} {o['path']}" for o in st.state.get("outside") or []
               if isinstance(o, dict) and isinstance(o.get("path"), str)]
    return [*(st.state.get("reached") or []), *outside]
