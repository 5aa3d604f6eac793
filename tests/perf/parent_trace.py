"""Where the parent process spends the time between a child's end and what follows (not a timed test).

Runs `diagnose ARGS...` in this process with the parent's steps wrapped: each call's start and end on one clock,
with its thread, goes to $OUT/parent-trace.jsonl (or ./parent-trace.jsonl). A probe thread also records how late
a 5 ms sleep wakes up (the interpreter lock held by other threads shows up as lateness).

  python3 tests/perf/parent_trace.py run examples/round9.py --out /tmp/x
  python3 tests/perf/parent_trace.py show parent-trace.jsonl [FROM_S TO_S]
"""
from __future__ import annotations

import functools
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path

import psutil

OUT = Path(os.environ.get("OUT", ".")) / "parent-trace.jsonl"
T0 = time.time()
_rows: list[tuple] = []


def _wrap(owner, name: str, label: str) -> None:
    setattr(owner, name, _traced_fn(getattr(owner, name), label))


def _what(args) -> str:
    for a in args:
        run = getattr(a, "run", None) or (a if hasattr(a, "stages") and hasattr(a, "role") else None)
        if run is not None and hasattr(run, "id"):
            return run.id
        if isinstance(a, str) and len(a) < 20:
            return a
    return ""


def _gil_probe(stop: threading.Event) -> None:
    last, cpu0 = time.time(), os.times()
    while not stop.is_set():
        if time.time() - last >= 1.0:     # the parent's own CPU use, per second of wall time
            cpu, now = os.times(), time.time()
            used = cpu.user + cpu.system - cpu0.user - cpu0.system
            _rows.append((round(last - T0, 3), round(used / (now - last), 3), "probe", "parent_cpu",
                          str(len(psutil.Process().children(recursive=True)))))
            last, cpu0 = now, cpu
        t = time.time()
        time.sleep(0.005)
        late = time.time() - t - 0.005
        if late > 0.05:
            _rows.append((round(t - T0, 3), round(late, 3), "probe", "late_wakeup", ""))


def install() -> None:
    from diagnose.cli import files
    from diagnose.engine import conclusions, planning, runs
    from diagnose.runs.runner import isolate, process_tree, stages
    for owner, name in ((isolate._Child, "spawn"), (isolate._Child, "watch_until_end"), (isolate._Child, "end"),
                        (isolate._Child, "collect"), (stages.StageRunner, "_stage"), (stages.StageRunner, "_step"),
                        (stages.StageRunner, "container"), (stages.StageRunner, "_end_lingering"),
                        (runs.RunPool, "save"), (runs.RunPool, "_advance"), (runs.RunPool, "release_held"),
                        (runs.RunPool, "_stage_done"), (files.Saver, "__call__"), (files.Saver, "_put"),
                        (conclusions.Conclusions, "say_early"), (conclusions.Conclusions, "conclude"),
                        (planning.Planner, "plan"), (planning.Planner, "launch_plan"),
                        (process_tree.ProcessTree, "scan"), (process_tree.ProcessTree, "alive"),
                        (process_tree.ProcessTree, "kill_all"), (process_tree.ProcessTree, "measure"),
                        (process_tree.ProcessTree, "_reap")):
        _wrap(owner, name, f"{owner.__name__}.{name}")
    from diagnose.analysis.causes import bisector
    from diagnose.engine import core
    from diagnose.runs.runner import container
    for owner, name in ((container.Container, "snapshot"), (container.Container, "place"),
                        (planning.Planner, "join_doubts"), (planning.Planner, "within"),
                        (planning.Planner, "verify_together"), (core.Engine, "_plan_late"),
                        (conclusions.Conclusions, "changed")):
        _wrap(owner, name, f"{owner.__name__}.{name}")
    bisector.minimal_set = _traced_fn(bisector.minimal_set, "bisector.minimal_set")
    for name in ("verify_stage", "predict_stage", "settle"):
        setattr(stages, name, _traced_fn(getattr(stages, name), name))
    stages.build_stage = _traced_fn(stages.build_stage, "build_stage")
    stages.describe_process = _traced_fn(stages.describe_process, "describe_process")


def _traced_fn(fn, label):
    @functools.wraps(fn)
    def traced(*a, **k):
        t = time.time()
        try:
            return fn(*a, **k)
        finally:
            _rows.append((round(t - T0, 3), round(time.time() - t, 3), threading.current_thread().name, label,
                          _what(a)))
    return traced


def show(path: str, lo: float = 0.0, hi: float = 1e9) -> None:
    for line in Path(path).read_text().splitlines():
        t, d, thread, label, what = json.loads(line)
        if lo <= t <= hi and (d >= 0.05 or label in ("_Child.spawn", "RunPool.release_held")):
            print(f"{t:8.2f} {d:7.3f}  {thread:<16} {label:<28} {what}")


def main(argv: list[str]) -> None:
    install()
    stop = threading.Event()
    threading.Thread(target=_gil_probe, args=(stop,), daemon=True).start()
    sys.argv = ["diagnose", *argv]
    try:
        runpy.run_module("diagnose", run_name="__main__")
    except SystemExit:
        pass
    finally:
        stop.set()
        OUT.write_text("".join(json.dumps(r) + "\n" for r in _rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["show"]:
        show(sys.argv[2], *map(float, sys.argv[3:5]))
    else:
        main(sys.argv[1:])
