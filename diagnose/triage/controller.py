"""The triage's controller: start (or join) the cluster, submit one task per submission, and yield each row as its
task ends; a task whose worker died twice is a `lost` row. It writes nothing: the CLI, which iterates it, writes
each row as it comes (the ledger, the tables) and shows the progress. When `stop` is set (the CLI's SIGINT /
SIGTERM handler), the loop, which never blocks for long, stops everything in flight (stopping.py) and ends; so does
a CLI that stops iterating (an error writing a row, a KeyboardInterrupt): closing the generator stops it all.
"""
from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Iterator

from diagnose.errors import BadInput

if TYPE_CHECKING:
    from diagnose.triage.rows import Row

STARTED = None       # yielded once, when every task is submitted: the rows follow


def cards_for(visible: list[str], picked: list[str], scheduler: str | None, workers: int | None) -> list[str]:
    """The cards a cluster started here spreads over (none on a cluster elsewhere): those this process may use
    (visible, CUDA_VISIBLE_DEVICES's own ids), or the ones of them --gpus picked; never two tasks on one card."""
    cards = [] if scheduler else ([visible[int(i)] for i in picked] if picked else visible)
    if cards and workers and workers > len(cards):
        raise BadInput(f"--workers {workers}: more than the {len(cards)} GPU(s) here; two tasks would share a card")
    return cards


def run(todo: list[dict], settings: dict, scheduler: str | None, workers: int | None, timing: dict,
        stop: threading.Event, log: int | None = None) -> Iterator[Row | None]:
    """settings: {gpus: the cards, limit_s: each command's hard limit}; timing: filled here (the cluster's start,
    when the tasks were submitted) for overhead.py; log: a file descriptor for the stderr of the workers of a
    cluster started here. Yields STARTED once the tasks are submitted, then each row; `stop.is_set()` afterwards
    says whether it was stopped."""
    if not todo or stop.is_set():
        return
    from diagnose.triage.cluster import client_for, submit
    from diagnose.triage.rows import lost_row
    from diagnose.triage.stopping import stop_all
    from diagnose.triage.task import triage_one
    t0 = time.time()
    try:
        client, cluster = client_for(scheduler, workers or len(settings["gpus"]) or 2, log)
    except Exception:
        if not stop.is_set():
            raise
        stop_all(None, None, {})             # a Ctrl-C that reached the workers still starting: Dask's failure
        return
    futures: dict = {}
    try:
        timing["cluster_s"] = time.time() - t0 if cluster is not None else None     # joined: not ours to time
        timing["submitted_at"], timing["host"] = time.time(), os.uname().nodename
        for item in todo:
            if stop.is_set():
                break
            futures[submit(client, triage_one, item, settings)] = item
        from dask.distributed import as_completed
        yield STARTED
        for fut in _as_they_end(as_completed(list(futures)), stop):
            try:
                row = fut.result()
            except Exception as e:  # noqa: BLE001 - KilledWorker, or a task that raised: the row says so
                row = lost_row(futures[fut], f"{type(e).__name__}: {e}")
            yield row
    except BaseException:  # noqa: BLE001 - the CLI failed writing a row, or a KeyboardInterrupt: no command may outlive us
        stop_all(client, cluster, futures)
        raise
    if stop.is_set():
        stop_all(client, cluster, futures)
        return
    client.close()
    if cluster is not None:
        cluster.close()


def _as_they_end(ac, stop: threading.Event):
    """Futures as they end, the main thread never blocked for long (a signal's handler runs only in the main thread,
    between two of its steps): each 0.2 s, `stop` is looked at."""
    while not ac.is_empty() and not stop.is_set():
        batch = ac.next_batch(block=False)
        if not batch:
            time.sleep(0.2)          # not stop.wait(): the handler's set() would take the lock a wait may hold
        for fut in batch:
            yield fut
            if stop.is_set():
                return
