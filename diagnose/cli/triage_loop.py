"""The triage's Dask loop: start (or join) the cluster, submit one task per submission, and hand each row on as
its task ends, with one progress bar (counts per status, time left). A task whose worker died twice is a `lost`
row; Ctrl-C stops the commands in flight, cancels the rest, and returns what was done."""
from __future__ import annotations

import os
import time

from diagnose.cli.wiring import err


def _gpus(gpus: str | None) -> list[str]:
    """The cards to spread over: those this process may use (CUDA_VISIBLE_DEVICES's own ids), or the ones of them
    --gpus picks, checked as `run` checks it."""
    from diagnose.cli.prepare import gpu_list
    from diagnose.runs.device import visible_gpus
    cards = visible_gpus()
    return [cards[int(i)] for i in gpu_list(gpus)] if gpus else cards


def run_all(todo: list[dict], settings: dict, scheduler: str | None, workers: int | None, gpus: str | None,
            rows: list[dict], total: int, on_row, stop_commands, timing: dict) -> tuple[list[dict], bool]:
    """timing: filled here (the cluster's start, when the tasks were submitted) for triage/overhead.py."""
    if not todo:
        return rows, False
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from diagnose.output.triage import counts
    from diagnose.triage.cluster import client_for, submit
    from diagnose.triage.rows import lost_row
    from diagnose.triage.task import triage_one
    cards = [] if scheduler else _gpus(gpus)
    if cards and workers and workers > len(cards):
        from diagnose.errors import BadInput
        raise BadInput(f"--workers {workers}: more than the {len(cards)} GPU(s) here; two tasks would share a card")
    settings = {**settings, "gpus": cards}
    t0 = time.time()
    client, cluster = client_for(scheduler, workers or len(cards) or 2)
    timing["cluster_s"] = time.time() - t0 if cluster is not None else None     # joined: not ours to time
    timing["submitted_at"], timing["host"] = time.time(), os.uname().nodename
    futures = {submit(client, triage_one, item, settings): item for item in todo}
    stopped = False
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=err, transient=False)
    try:
        from dask.distributed import as_completed
        with bar:
            task = bar.add_task("triage", total=total, completed=len(rows))
            for fut in _as_they_end(as_completed(list(futures))):
                item = futures[fut]
                try:
                    row = fut.result()
                except Exception as e:  # noqa: BLE001 - KilledWorker, or a task that raised: the row says so
                    row = lost_row(item, f"{type(e).__name__}: {e}")
                rows.append(row)
                on_row(row, rows)
                bar.update(task, advance=1, description="triage " + " ".join(
                    f"{n} {s}" for s, n in counts(rows).items()))
    except BaseException as e:  # noqa: BLE001 - Ctrl-C, or a failure writing a row: no command may outlive us
        stopped = isinstance(e, KeyboardInterrupt)
        _wind_down(client, cluster, futures, stop_commands)
        if not stopped:
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return rows, stopped


def _as_they_end(ac):
    """Futures as they end, the main thread never blocked for long: Ctrl-C's signal often lands on one of Dask's
    threads, and a main thread waiting on a lock without a timeout would never see it."""
    while not ac.is_empty():
        batch = ac.next_batch(block=False)
        if not batch:
            time.sleep(0.2)
        yield from batch


def _wind_down(client, cluster, futures, stop_commands) -> None:
    """Nothing queued starts any more (cancelled first), then every command in flight here is stopped, until
    none is left; a second Ctrl-C meanwhile does not cut this short. A cluster elsewhere keeps the commands it
    already started: they end at their own deadlines."""
    import signal
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        client.cancel(list(futures))
        while cluster is not None and stop_commands():
            pass
    finally:
        signal.signal(signal.SIGINT, old)
