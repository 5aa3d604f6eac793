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

from diagnose.triage.rows import row_of

MARGIN_S = 120.0
STAGES = 3                   # test, benchmark, leaderboard: each after its own compile step
RUN_FACTOR = 8               # a full `run` starts the baseline and the probes' variants: a longer limit


def hard_limit(settings: dict) -> float:
    """A backstop only (the command keeps every stage's own deadline): with no --budget, a problem's own timeouts
    are not known here, so a generous 600 s a stage stands in for them."""
    per = float(settings.get("budget") or 600.0) + float(settings.get("compile_budget") or 120.0)
    limit = STAGES * per + MARGIN_S
    return limit * (RUN_FACTOR if settings.get("depth") == "run" else 1)


def _as_given(path: str, cwd: str) -> str:
    """A path the user gave, for a command that runs in the triage's folder: whole paths below it become relative
    (a report then names no machine's layout); a name that starts with '-' gets './', or it reads as an option."""
    if os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        path = path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
    return "./" + path if path.startswith("-") else path


def argv_for(item: dict, settings: dict, cwd: str | None = None) -> list[str]:
    """In the triage's folder (cwd), the paths as the user gave them; elsewhere (a remote worker without that
    folder), whole ones."""
    given = item.get("given") or {}
    where = dict(file=item["file"], out=item["report_dir"], problem=settings.get("problem"),
                 problems_root=settings.get("problems_root"))
    if cwd is not None:
        where.update({k: _as_given(given[k], cwd) for k in where if given.get(k)})
    cmd = [sys.executable, "-m", "diagnose", settings.get("depth") or "check", where["file"],
           "--out", where["out"], "--quiet"]
    for flag, key in (("--problem", "problem"), ("--problems-root", "problems_root"), ("--budget", "budget"),
                      ("--compile-budget", "compile_budget"), ("--task", "task")):
        value = where.get(key, settings.get(key))
        if value is not None:
            cmd += [flag, str(value)]
    if settings.get("small") is not None:
        cmd.append("--small" if settings["small"] else "--full-shapes")
    return cmd


def _worker_name() -> str | None:
    try:
        from distributed import get_worker
        return str(get_worker().name)
    except (ImportError, ValueError):     # not inside a Dask task (a direct call)
        return None


def _worker_gpu(settings: dict, name: str | None) -> str | None:
    gpus = settings.get("gpus") or []
    return gpus[int(name) % len(gpus)] if gpus and name and name.isdigit() else None


def triage_one(item: dict, settings: dict) -> dict:
    """item: {file, key, report_dir, shown, cwd, given}. The row, whatever the command did."""
    began = time.time()
    env = dict(os.environ)
    # no run may see the triage's folder: its ledger, its key, the other files' reports (runs/jail.py hides it)
    env["DIAGNOSE_HIDE"] = os.pathsep.join(p for p in (env.get("DIAGNOSE_HIDE"),
                                                      os.path.dirname(os.path.dirname(item["report_dir"]))) if p)
    worker = _worker_name()
    gpu = _worker_gpu(settings, worker)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    limit, t0 = hard_limit(settings), time.monotonic()
    # the triage's own folder where this worker has it (a remote worker may not): the paths are then relative
    cwd = item.get("cwd") if item.get("cwd") and os.path.isdir(item["cwd"]) else None
    proc = subprocess.Popen(argv_for(item, settings, cwd), stdout=subprocess.PIPE,
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
    row.update(worker=worker, started_at=began, ended_at=time.time(), command_s=wall)
    return row
