"""`diagnose triage PATH...`: many submissions, each `check` (or `run`) in a process of its own, over a Dask
cluster, one GPU per task. The triage itself is diagnose/triage/'s (its items, keys and resume, the controller that
yields each row as its task ends); this module writes: each row as the controller yields it, by this process only,
from what the task returned (OUT/triage.jsonl, one signed line each, written whole: triage/ledger.py), then
OUT/triage.md and OUT/triage.csv again. A second triage with the same inputs and settings reruns nothing that
finished; SIGINT or SIGTERM stops everything in flight within seconds (triage/stopping.py), keeps every row
written, and says in one line how many were done and the command that resumes. Exit 0 when every submission
passed, 1 when any did not, 2 bad input (or no Dask), 130 / 143 stopped by SIGINT / SIGTERM.
"""
from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path

from rich.markup import escape

from diagnose.cli.files import OutDir, write_atomic
from diagnose.cli.ledger_file import LedgerFile
from diagnose.cli.options import Shared, gpu_list
from diagnose.cli.wiring import Signals, err, out
from diagnose.triage.ledger import JSONL, Ledger, resume
from diagnose.triage.rows import Row

MD, CSV, DASK_LOG = "triage.md", "triage.csv", ".triage-dask.log"


def _tables(root: Path, ledger: Ledger, rows: list[Row], total: int, cost: str = "") -> None:
    from diagnose.output.triage import csv_text, markdown
    write_atomic(root / MD, markdown(rows, total, cost=cost, changed=ledger.changed_reports(rows)))
    write_atomic(root / CSV, csv_text(rows))


def _plan(opts: Shared, depth: str, scheduler: str | None, workers: int | None) -> dict:
    """What every task shares: the cards of a cluster made here, and each command's hard limit."""
    from diagnose.runs.device import visible_gpus
    from diagnose.triage.controller import cards_for
    from diagnose.triage.task import hard_limit
    return {"gpus": cards_for(visible_gpus(), gpu_list(opts.gpus), scheduler, workers),
            "limit_s": hard_limit(opts.budget, opts.compile_budget, depth)}


def triage(paths: list[Path], depth: str, opts: Shared, out_dir: Path, scheduler: str | None, workers: int | None,
           resumes: str = "the same command") -> int:
    """opts: checked; resumes: the command line that resumes this triage, as the user would type it."""
    from diagnose.triage.inputs import items as items_of
    settings = _plan(opts, depth, scheduler, workers)
    whole = opts.with_paths(lambda p: p.resolve())
    flags = child_flags(opts)
    with Signals() as signals:                   # from here on, SIGINT / SIGTERM only set the flag the loop polls
        holder = OutDir(out_dir, "--out")
        try:
            root = holder.path
            ledger = LedgerFile(root)
            items = items_of(paths, depth, whole.answer(), root, str(out_dir), flags)
            done, note = ledger.done()
            if note:
                err.print(escape(note))
            kept, todo = resume(items, done)
            ledger.key()                         # made now, before any task runs, if this is the first triage here
            out.print(f"triage: {len(items)} submission(s), {len(kept)} already done in {root / JSONL}, "
                      f"{len(todo)} to {depth}")
            _walls_once(todo)
            return _drive(root, ledger, todo, kept, len(items), settings, scheduler, workers, signals, resumes)
        finally:
            holder.close()


def child_flags(opts: Shared) -> dict[str, list[str]]:
    """The options each task's command is given: "here", from this folder, with the paths as the user gave them
    (a report then names them as the user did); "whole", resolved, for a worker without this folder."""
    from diagnose.triage.inputs import as_given
    here = opts.with_paths(lambda p: Path(as_given(str(p), os.getcwd())))
    return {"here": here.argv(), "whole": opts.with_paths(lambda p: p.resolve()).argv()}


def _drive(root: Path, ledger: LedgerFile, todo: list[dict], kept: list[Row], total: int, settings: dict,
           scheduler: str | None, workers: int | None, signals, resumes: str) -> int:
    """The controller's rows, each written as it comes; the tables after each; the last line."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from diagnose.output.triage import counts
    from diagnose.triage.controller import run
    from diagnose.triage.overhead import describe, measure
    rows, timing, t0 = list(kept), {}, time.monotonic()

    def cost() -> str:                   # this triage's tasks only: kept rows ran in another
        return describe(measure(rows[len(kept):], timing))
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   console=err, transient=False)
    # what the workers of a cluster made here say (Dask's warnings) goes to a file, never to the terminal
    log = os.open(root / DASK_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if todo and not scheduler else None
    try:
        with closing(run(todo, settings, scheduler, workers, timing, signals.stop, log)) as controller:
            for row in controller:
                if row is None:          # every task submitted: the bar starts
                    bar.start()
                    shown = bar.add_task("triage", total=total, completed=len(rows))
                    continue
                rows.append(row)
                ledger.append(row)
                _tables(root, ledger, rows, total, cost())
                bar.update(shown, advance=1, description="triage " + " ".join(
                    f"{n} {s}" for s, n in counts(rows).items()))
    finally:
        bar.stop()
        if log is not None:
            os.close(log)
    said = cost()
    _tables(root, ledger, rows, total, said)
    summary = ", ".join(f"{n} {s}" for s, n in counts(rows).items()) or "none"
    if signals.stop.is_set() or signals.code:
        err.print(escape(f"interrupted: {len(rows)} of {total} submission(s) done ({summary}); "
                         f"`{resumes}` resumes from {root / JSONL}"))
        from diagnose.cli.exits import stopped_code
        return stopped_code((signals.code or 130) - 128)
    out.print(f"triage: {len(rows)} of {total} done in {time.monotonic() - t0:.0f} s ({summary}); {root / MD}")
    if said:
        out.print(said)
    return 0 if all(r.status == "ok" for r in rows) else 1


def _walls_once(todo: list) -> None:
    """Which walls each run would lack on this machine (runs/jail.py), said once at the top: every row says it too."""
    if not todo:
        return
    from diagnose.cli.prepare import _walls_asked
    from diagnose.runs.runner.stages import walls_here
    asked = _walls_asked()
    walls = walls_here(asked["private_mounts"], asked["network"])
    if walls.get("missing"):
        err.print(f"isolation: each run here lacks {', '.join(walls['missing'])} ({walls.get('why') or 'refused'}): "
                  f"what a submission does may reach beyond its run")
