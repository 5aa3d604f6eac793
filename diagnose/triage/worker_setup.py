"""Dask's preload for the workers of a cluster made here (cluster.py): a terminal's Ctrl-C reaches every process of
its group, and a worker is not to act on it (the controller stops the triage in order, killing what it must). A
handler that does nothing, not SIG_IGN: a caught signal goes back to its default at exec, so the commands a task
starts get SIGINT as usual."""
from __future__ import annotations

import signal
import threading


def _aside(signum, frame) -> None:
    pass


def dask_setup(worker) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _aside)
