"""`diagnose triage PATH...`: many submissions, each `check` (or `run`) in a process of its own, over a Dask
cluster, one GPU per task. Rows are written as each task ends, by this process only, from what the task returned
(OUT/triage.jsonl, one signed line each, written whole: triage/ledger.py); OUT/triage.md and OUT/triage.csv are
rendered again after each. A second triage with the same inputs and settings reruns nothing that finished; SIGINT
or SIGTERM stops everything in flight within seconds (triage/stopping.py), keeps every row written, and says in one
line how many were done and the command that resumes. Exit 0 when every submission passed, 1 when any did not,
2 bad input (or no Dask), 130 / 143 stopped by SIGINT / SIGTERM.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from rich.markup import escape

from diagnose.cli.files import OutDir, write_atomic
from diagnose.cli.wiring import Signals, err, out
from diagnose.errors import BadInput
from diagnose.triage.ledger import JSONL, Ledger, rerun

MD, CSV, DASK_LOG = "triage.md", "triage.csv", ".triage-dask.log"


def _settings(o: dict) -> dict:
    """What changes a submission's answer (its key): never where it runs (the GPU, the cluster)."""
    for flag in ("problem", "problems_root"):
        if o.get(flag) is not None:
            if not Path(o[flag]).is_dir():
                raise BadInput(f"--{flag.replace('_', '-')} {o[flag]}: not a directory")
            o[flag] = str(Path(o[flag]).resolve())
    if o["depth"] not in ("check", "run"):
        raise BadInput(f"--depth must be check or run, got {o['depth']!r}")
    from diagnose.cli.prepare import positive
    for flag in ("budget", "compile_budget"):
        positive(f"--{flag.replace('_', '-')}", o.get(flag))
    return {k: o.get(k) for k in ("depth", "problem", "problems_root", "budget", "compile_budget", "small", "task")}


def _items(paths: list[Path], settings: dict, root: Path, given: dict) -> list[dict]:
    """given: --out and the problem folders as the user named them. Each command is given its paths in that
    form, from this folder (task.py), so its report names them as the user did; whole paths where it runs
    elsewhere."""
    from diagnose.triage.inputs import expand, key_of
    items = []
    for p in expand(paths):
        key = key_of(p, settings)
        rel = f"reports/{p.stem.lstrip('.')[:40] or 'submission'}-{key[:10]}"      # never a hidden folder
        items.append({"file": os.path.abspath(p), "shown": str(p), "key": key, "report": rel,
                      "report_dir": str((root / rel).resolve()), "cwd": os.getcwd(),
                      "given": {**given, "file": str(p), "out": str(Path(given["out"]) / rel)}})
    return items


def _tables(root: Path, ledger: Ledger, rows: list[dict], total: int, cost: str = "") -> None:
    from diagnose.output.triage import csv_text, markdown
    write_atomic(root / MD, markdown(rows, total, cost=cost, changed=ledger.changed_reports(rows)))
    write_atomic(root / CSV, csv_text(rows))


def triage(paths: list[Path], opts: dict, out_dir: Path, scheduler: str | None, workers: int | None,
           gpus: str | None, resume: str = "the same command") -> int:
    """resume: the command line that resumes this triage, as the user would type it (said when stopped)."""
    from diagnose.cli.triage_loop import run_all
    given = {k: str(opts[k]) for k in ("problem", "problems_root") if opts.get(k) is not None}
    settings = _settings(dict(opts))
    with Signals() as signals:                   # from here on, SIGINT / SIGTERM only set the flag the loop polls
        holder = OutDir(out_dir, "--out")
        try:
            root = holder.path
            ledger = Ledger(root)
            items = _items(paths, settings, root, {**given, "out": str(out_dir)})
            done, note = ledger.done()
            if note:
                err.print(escape(note))
            keep = {i["key"]: done[i["key"]] for i in items if i["key"] in done and not rerun(done[i["key"]])}
            todo = [i for i in items if i["key"] not in keep]
            ledger.key()                         # made now, before any task runs, if this is the first triage here
            t0 = time.monotonic()
            out.print(f"triage: {len(items)} submission(s), {len(keep)} already done in {root / JSONL}, "
                      f"{len(todo)} to {settings['depth']}")
            _walls_once(todo)
            timing: dict = {}

            def cost(rows: list[dict]) -> str:       # this triage's tasks only: kept rows ran in another
                from diagnose.triage.overhead import describe, measure
                return describe(measure(rows[len(keep):], timing))

            def on_row(row: dict, rows: list[dict]) -> None:
                ledger.append(row)
                _tables(root, ledger, rows, len(items), cost(rows))

            rows, stopped = run_all(todo, settings, scheduler, workers, gpus, list(keep.values()), len(items),
                                    on_row, timing, signals.stop, root / DASK_LOG)
            said = cost(rows)
            _tables(root, ledger, rows, len(items), said)
            from diagnose.output.triage import counts
            summary = ", ".join(f"{n} {s}" for s, n in counts(rows).items()) or "none"
            if stopped or signals.code:
                err.print(escape(f"interrupted: {len(rows)} of {len(items)} submission(s) done ({summary}); "
                                 f"`{resume}` resumes from {root / JSONL}"))
                from diagnose.cli.exits import stopped_code
                return stopped_code((signals.code or 130) - 128)
            out.print(f"triage: {len(rows)} of {len(items)} done in {time.monotonic() - t0:.0f} s ({summary}); "
                      f"{root / MD}")
            if said:
                out.print(said)
            return 0 if all(r["status"] == "ok" for r in rows) else 1
        finally:
            holder.close()


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
