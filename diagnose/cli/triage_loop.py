"""The triage's Dask loop: start (or join) the cluster, submit one task per submission, and hand each row on as
its task ends, with one progress bar (counts per status, time left). A task whose worker died twice is a `lost`
row. When `stop` is set (the controller's SIGINT / SIGTERM handler), the loop, which never blocks for long, stops
everything in flight (triage/stopping.py) and returns what was done."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from diagnose.cli.wiring import err


def _gpus(gpus: str | None) -> list[str]:
    """The cards to spread over: those this process may use (CUDA_VISIBLE_DEVICES's own ids), or the ones of them
    --gpus picks, checked as `run` checks it."""
    from diagnose.cli.prepare import gpu_list
    from diagnose.runs.device import visible_gpus
    cards = visible_gpus()
    return [cards[int(i)] for i in gpu_list(gpus)] if gpus else cards


def _cards(scheduler: str | None, workers: int | None, gpus: str | None) -> list[str]:
    """The cards a cluster started here spreads over (none on a cluster elsewhere); never two tasks on one card."""
    cards = [] if scheduler else _gpus(gpus)
    if cards and workers and workers > len(cards):
        from diagnose.errors import BadInput
        raise BadInput(f"--workers {workers}: more than the {len(cards)} GPU(s) here; two tasks would share a card")
    return cards


def run_all(todo: list[dict], settings: dict, scheduler: str | None, workers: int | None, gpus: str | None,
            rows: list[dict], total: int, on_row, timing: dict, stop: threading.Event | None = None,
            log: Path | None = None) -> tuple[list[dict], bool]:
    """timing: filled here (the cluster's start, when the tasks were submitted) for triage/overhead.py; log: the
    stderr of the workers of a cluster started here. Returns the rows and whether `stop` ended it."""
    stop = stop or threading.Event()
    if not todo or stop.is_set():
        return rows, stop.is_set()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from diagnose.output.triage import counts
    from diagnose.triage.cluster import client_for, submit
    from diagnose.triage.rows import lost_row
    from diagnose.triage.stopping import stop_all
    from diagnose.triage.task import triage_one
    cards = _cards(scheduler, workers, gpus)
    settings = {**settings, "gpus": cards}
    t0 = time.time()
    try:
        client, cluster = client_for(scheduler, workers or len(cards) or 2, log)
    except Exception:
        if not stop.is_set():
            raise
        stop_all(None, None, {})             # a Ctrl-C that reached the workers still starting: Dask's failure
        return rows, True
    futures: dict = {}
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=err, transient=False)
    try:
        timing["cluster_s"] = time.time() - t0 if cluster is not None else None     # joined: not ours to time
        timing["submitted_at"], timing["host"] = time.time(), os.uname().nodename
        for item in todo:
            if stop.is_set():
                break
            futures[submit(client, triage_one, item, settings)] = item
        from dask.distributed import as_completed
        with bar:
            task = bar.add_task("triage", total=total, completed=len(rows))
            for fut in _as_they_end(as_completed(list(futures)), stop):
                item = futures[fut]
                try:
                    row = fut.result()
                except Exception as e:  # noqa: BLE001 - KilledWorker, or a task that raised: the row says so
                    row = lost_row(item, f"{type(e).__name__}: {e}")
                rows.append(row)
                on_row(row, rows)
                bar.update(task, advance=1, description="triage " + " ".join(
                    f"{n} {s}" for s, n in counts(rows).items()))
    except BaseException:  # noqa: BLE001 - a failure writing a row, or a KeyboardInterrupt: no command may outlive us
        stop_all(client, cluster, futures)
        raise
    if stop.is_set():
        stop_all(client, cluster, futures)
        return rows, True
    client.close()
    if cluster is not None:
        cluster.close()
    return rows, False


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
