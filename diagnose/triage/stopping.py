"""Stopping a triage (SIGINT or SIGTERM to its controller) within STOP_S, leaving no process behind: every command
in flight gets SIGINT to its process group (it ends INTERRUPTED and cleans up its own runs), then SIGKILL after
GRACE_S; the cluster made here gets CLOSE_S to close, then every process the triage started that is still there
is killed. Dask's own logging is silenced first: a cluster torn down in a hurry says nothing that matters.

The processes are the controller's descendants, gathered again and again while stopping; once stopping begins,
the controller is a subreaper (Linux: runs/subreaper.py, the same setting the runner and the worker make), so a
process whose parent is killed first is still one of them (not before: every orphan would then stay its zombie
until the triage ends). A command is matched exactly: a Python `-m diagnose check|run` (task.py starts nothing
else).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import psutil

from diagnose.runs.subreaper import become_subreaper

STOP_S = 10.0       # the promise: from the signal to the exit
GRACE_S = 3.5       # a command's own cleanup after SIGINT
CLOSE_S = 1.5       # the cluster's own close (within STOP_S: 1 + GRACE_S + 0.5 + CLOSE_S + 0.5 + 1)
QUIET = ("distributed", "tornado", "asyncio", "bokeh")


def silence() -> None:
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in QUIET:
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def is_command(cmdline: list[str]) -> bool:
    """task.py's command: `PYTHON -m diagnose check|run ...`, nothing that merely names diagnose."""
    return len(cmdline) >= 4 and cmdline[1:3] == ["-m", "diagnose"] and cmdline[3] in ("check", "run")


def within(fn, seconds: float) -> bool:
    """fn in a thread of its own, waited for at most `seconds` (a Dask call may hang on a cluster going away).
    True if it ended."""
    t = threading.Thread(target=_quietly, args=(fn,), daemon=True, name="triage-stop")
    t.start()
    t.join(seconds)
    return not t.is_alive()


def _quietly(fn) -> None:
    try:
        fn()
    except BaseException:  # noqa: BLE001 - stopping: a cluster that already went is what we want
        pass


class Tree:
    """The controller's descendants, every one ever seen while stopping (psutil.Process: never a reused pid)."""

    def __init__(self):
        self.me, self.seen = psutil.Process(), {}
        self.gather()

    def gather(self) -> None:
        try:
            for p in self.me.children(recursive=True):
                self.seen.setdefault(p.pid, p)
        except psutil.Error:
            pass

    def alive(self, procs=None) -> list:
        out = []
        for p in (self.seen.values() if procs is None else procs):
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def commands(self) -> list:
        out = []
        for p in self.alive():
            try:
                if is_command(p.cmdline()):
                    out.append(p)
            except psutil.Error:        # gone, or not ours to read
                pass
        return out


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)       # task.py starts each command in a session of its own: its group is its pid
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(client, cluster, futures) -> int:
    """Everything in flight stops; returns how many commands were stopped. A cluster elsewhere (a client, cluster
    None) only forgets the tasks not yet started: the commands its workers already run end at their own deadlines.
    No client: a cluster made here that failed to start; whatever it started is killed."""
    silence()
    become_subreaper()
    tree = Tree()
    if client is not None:
        within(lambda: client.cancel(list(futures)), 1.0)        # nothing queued starts any more
        if cluster is None:
            within(lambda: client.close(timeout=1), 1.5)
            return 0
    stopped: dict[int, object] = {}
    t0 = time.monotonic()
    while True:
        for p in tree.commands():
            if p.pid not in stopped:             # one started meanwhile (a task the cancel came too late for)
                stopped[p.pid] = p
                _killpg(p.pid, signal.SIGINT)
        spent = time.monotonic() - t0
        if (stopped and not tree.alive(list(stopped.values()))) or (not stopped and spent >= 0.5) \
                or spent >= GRACE_S:
            break
        time.sleep(0.1)
        tree.gather()
    for pid in stopped:
        _killpg(pid, signal.SIGKILL)
    if client is not None:
        within(lambda: client.close(timeout=0.5), 0.5)
        within(lambda: cluster.close(timeout=CLOSE_S), CLOSE_S + 0.5)
        cluster.shutdown_on_close = False        # its processes are killed below: no second close at exit
    tree.gather()
    for p in tree.alive():
        try:
            p.kill()
        except psutil.Error:        # gone meanwhile
            pass
    psutil.wait_procs(tree.alive(), timeout=1)
    return len(stopped)
