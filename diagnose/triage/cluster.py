"""The Dask client a triage submits to: a cluster already running (`--scheduler tcp://HOST:PORT`: `dask scheduler`
and `dask worker --resources GPU=1` on each GPU host, or dask-jobqueue), or one made here: a LocalCluster with one
single-threaded worker process per GPU (named 0, 1, ...: task.py pins each to its GPU), or a few CPU workers on a
machine without one. Every worker offers one "GPU" resource and each task asks for it, so no two tasks share a
card. Dask is imported only here, when a triage starts.

A worker that dies is retried once (the scheduler's allowed-failures), then its task fails with KilledWorker:
the controller makes that row a lost one.

A Ctrl-C at a terminal goes to the whole process group, workers of a cluster made here included: only the
controller, which stops everything in order, is to act on it, so each such worker sets SIGINT aside when it starts
(worker_setup.py; a handler, not SIG_IGN: its commands, after their exec, get SIGINT as usual). Otherwise each dies
of it mid-task, with Dask's traceback. What the workers write to stderr (Dask's warnings, a traceback of one that
a Ctrl-C caught still starting) goes to a log file of their own, never to the triage's terminal.
"""
from __future__ import annotations

import contextlib
import os
import sys

ALLOWED_FAILURES = 1


def client_for(scheduler: str | None, workers: int, log: int | None = None):
    """log: the file descriptor (a file the CLI opened) the workers of a cluster made here write their stderr to
    (they inherit it as they start)."""
    import dask
    from dask.distributed import Client, LocalCluster
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                     "distributed.worker.daemon": False,    # a worker's task starts processes of its own
                     "distributed.admin.tick.limit": "1h"})
    if scheduler:
        try:
            return Client(scheduler, timeout="30s"), None
        except (OSError, TimeoutError) as e:
            from diagnose.errors import BadInput
            raise BadInput(f"--scheduler {scheduler}: no Dask scheduler answered ({e})") from None
    dask.config.set({"distributed.worker.preload": ["diagnose.triage.worker_setup"]})
    with _stderr_to(log):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, resources={"GPU": 1},
                               dashboard_address=None, silence_logs=50)
    return Client(cluster), cluster


@contextlib.contextmanager
def _stderr_to(log: int | None):
    """fd 2 is the log while the workers start (each inherits it); the controller's own again after."""
    if log is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def submit(client, fn, item: dict, settings: dict):
    return client.submit(fn, item, settings, resources={"GPU": 1}, pure=False)   # a key of its own: never shared
