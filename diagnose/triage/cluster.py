"""The Dask client a triage submits to: a cluster already running (`--scheduler tcp://HOST:PORT`: `dask scheduler`
and `dask worker --resources GPU=1` on each GPU host, or dask-jobqueue), or one made here: a LocalCluster with one
single-threaded worker process per GPU (named 0, 1, ...: task.py pins each to its GPU), or a few CPU workers on a
machine without one. Every worker offers one "GPU" resource and each task asks for it, so no two tasks share a
card. Dask is imported only here, when a triage starts.

A worker that dies is retried once (the scheduler's allowed-failures), then its task fails with KilledWorker:
the CLI writes that row as lost.
"""
from __future__ import annotations

ALLOWED_FAILURES = 1


def client_for(scheduler: str | None, workers: int):
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
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, resources={"GPU": 1},
                           dashboard_address=None, silence_logs=50)
    return Client(cluster), cluster


def submit(client, fn, item: dict, settings: dict):
    return client.submit(fn, item, settings, resources={"GPU": 1}, pure=False)   # a key of its own: never shared
