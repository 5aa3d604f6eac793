"""One submission's triage, as a Dask task: the CLI's own `check` (or `run`) in a process of its own, under a hard
limit of its stages' budgets, their compile steps and a margin. A hang, a CUDA fault or a submission that kills
its process ends that process, never the worker: the task reads what the command left (its exit code, its last
lines, its session.json) into a row, whatever happened.

On a cluster this machine made, the task pins the worker's GPU for the command (CUDA_VISIBLE_DEVICES, from the
worker's name); on a cluster the user runs, each worker's own environment does.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

from diagnose.triage.rows import Row, row_of

MARGIN_S = 120.0
STAGES = 3                   # test, benchmark, leaderboard: each after its own compile step
RUN_FACTOR = 8               # a full `run` starts the baseline and the probes' variants: a longer limit


def hard_limit(budget: float | None, compile_budget: float | None, depth: str) -> float:
    """A backstop only (the command keeps every stage's own deadline): with no --budget, a problem's own timeouts
    are not known here, so a generous 600 s a stage stands in for them."""
    per = float(budget or 600.0) + float(compile_budget or 120.0)
    return (STAGES * per + MARGIN_S) * (RUN_FACTOR if depth == "run" else 1)


def _worker_name() -> str | None:
    try:
        from distributed import get_worker
        return str(get_worker().name)
    except (ImportError, ValueError):     # not inside a Dask task (a direct call)
        return None


def _worker_gpu(settings: dict, name: str | None) -> str | None:
    gpus = settings.get("gpus") or []
    return gpus[int(name) % len(gpus)] if gpus and name and name.isdigit() else None


def triage_one(item: dict, settings: dict) -> Row:
    """item: inputs.py's (its argv from the triage's folder, and with whole paths); settings: {gpus, limit_s}.
    The row, whatever the command did."""
    began = time.time()
    env = dict(os.environ)
    # no run may see the triage's folder: its ledger, its key, the other files' reports (runs/jail.py hides it)
    env["DIAGNOSE_HIDE"] = os.pathsep.join(p for p in (env.get("DIAGNOSE_HIDE"),
                                                      os.path.dirname(os.path.dirname(item["report_dir"]))) if p)
    worker = _worker_name()
    gpu = _worker_gpu(settings, worker)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    limit, t0 = settings["limit_s"], time.monotonic()
    # the triage's own folder where this worker has it (a remote worker may not): the paths are then as given
    cwd = item.get("cwd") if item.get("cwd") and os.path.isdir(item["cwd"]) else None
    argv = [sys.executable, "-m", "diagnose", *(item["argv"] if cwd else item["argv_whole"])]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", env=env, cwd=cwd,
                            start_new_session=True)
    killed = False
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        killed = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)      # the command and everything it started
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    wall = time.monotonic() - t0
    row = row_of(item, settings, proc.returncode, out or "", err or "", wall, limit if killed else None,
                 gpu=gpu, host=os.uname().nodename, since=began - 1.0)   # 1 s: a coarse mtime is still this one's
    # for triage/overhead.py: the command's own seconds unrounded (wall_s is to 0.1 s, coarser than the wrapping)
    return replace(row, worker=worker, started_at=began, ended_at=time.time(), command_s=wall)
