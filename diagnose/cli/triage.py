"""`diagnose triage PATH...`: many submissions, each `check` (or `run`) in a process of its own, over a Dask
cluster, one GPU per task. Rows are written as each task ends (OUT/triage.jsonl, one line each, written whole);
OUT/triage.md and OUT/triage.csv are rendered again after each. A second triage with the same inputs and settings
reruns nothing that finished; Ctrl-C stops the commands in flight (each ends INTERRUPTED), keeps every row
written, and says how many were done. Exit 0 when every submission passed, 1 when any did not, 130 stopped.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from diagnose.cli.files import OutDir, write_atomic
from diagnose.cli.wiring import err, out
from diagnose.errors import BadInput

JSONL, MD, CSV = "triage.jsonl", "triage.md", "triage.csv"
RERUN = ("lost",)          # rows that say nothing about the submission: a second triage runs them again


def _rerun(row: dict) -> bool:
    """A row that says nothing about the submission: a lost worker, bad input, or a command that was stopped."""
    return row.get("status") in RERUN or row.get("exit_code") in (2, 130, 143)


def _settings(o: dict) -> dict:
    """What changes a submission's answer (its key): never where it runs (the GPU, the cluster)."""
    for flag in ("problem", "problems_root"):
        if o.get(flag) is not None:
            if not Path(o[flag]).is_dir():
                raise BadInput(f"--{flag.replace('_', '-')} {o[flag]}: not a directory")
            o[flag] = str(Path(o[flag]).resolve())
    if o["depth"] not in ("check", "run"):
        raise BadInput(f"--depth must be check or run, got {o['depth']!r}")
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


def _done(root: Path) -> dict[str, dict]:
    """Rows a previous triage wrote: the last one per key. A line cut short by a kill is skipped."""
    rows = {}
    path = root / JSONL
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict) and r.get("key"):
                rows[r["key"]] = r
    return rows


def _append(root: Path, row: dict) -> None:
    with open(root / JSONL, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, default=str) + "\n")     # one write: a line is whole or absent


def _tables(root: Path, rows: list[dict], total: int, cost: str = "") -> None:
    from diagnose.output.triage import csv_text, markdown
    write_atomic(root / MD, markdown(rows, total, cost=cost))
    write_atomic(root / CSV, csv_text(rows))


def _stop_commands() -> int:
    """Ctrl-C: every command this machine's workers started gets SIGINT (each ends INTERRUPTED and keeps its
    processes' cleanup), then SIGKILL after a grace."""
    import psutil
    procs = [p for p in psutil.Process().children(recursive=True)
             if "diagnose" in " ".join(_cmd(p)) and any(w in _cmd(p) for w in ("check", "run"))]
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass
    _, alive = psutil.wait_procs(procs, timeout=20) if procs else ([], [])
    for p in alive:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(procs)


def _cmd(p) -> list[str]:
    try:
        return p.cmdline()
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return []


def triage(paths: list[Path], opts: dict, out_dir: Path, scheduler: str | None, workers: int | None,
           gpus: str | None) -> int:
    from diagnose.cli.triage_loop import run_all
    given = {k: str(opts[k]) for k in ("problem", "problems_root") if opts.get(k) is not None}
    settings = _settings(dict(opts))
    holder = OutDir(out_dir, "--out")
    try:
        root = holder.path
        items = _items(paths, settings, root, {**given, "out": str(out_dir)})
        done = _done(root)
        keep = {i["key"]: done[i["key"]] for i in items if i["key"] in done and not _rerun(done[i["key"]])}
        todo = [i for i in items if i["key"] not in keep]
        t0 = time.monotonic()
        out.print(f"triage: {len(items)} submission(s), {len(keep)} already done in {root / JSONL}, "
                  f"{len(todo)} to {settings['depth']}")
        timing: dict = {}

        def cost(rows: list[dict]) -> str:       # this triage's tasks only: kept rows ran in another
            from diagnose.triage.overhead import describe, measure
            return describe(measure(rows[len(keep):], timing))

        rows, stopped = run_all(todo, settings, scheduler, workers, gpus, list(keep.values()), len(items),
                                lambda row, rows: (_append(root, row), _tables(root, rows, len(items), cost(rows))),
                                _stop_commands, timing)
        said = cost(rows)
        _tables(root, rows, len(items), said)
        from diagnose.output.triage import counts
        summary = ", ".join(f"{n} {s}" for s, n in counts(rows).items())
        if stopped:
            err.print(f"interrupted: {len(rows)} of {len(items)} submission(s) done ({summary}); the same command "
                      f"again resumes from {root / JSONL}")
            return 130
        out.print(f"triage: {len(rows)} of {len(items)} done in {time.monotonic() - t0:.0f} s ({summary}); "
                  f"{root / MD}")
        if said:
            out.print(said)
        return 0 if all(r["status"] == "ok" for r in rows) else 1
    finally:
        holder.close()
