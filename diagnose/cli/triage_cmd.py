"""The `triage` command's options (its work is cli/triage.py's), registered on the app when the CLI starts."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

import typer

from diagnose.cli.options import (
    BUDGET,
    COMPILE_BUDGET,
    PROBES,
    PROBLEM,
    PROBLEMS_ROOT,
    SMALL,
    STAGES,
    TASK,
    Shared,
    _Command,
)


def register(app) -> None:
    app.command(cls=_Command)(triage)


def triage(
    ctx: typer.Context,
    paths: List[Path] = typer.Argument(..., metavar="PATH", show_default=False,
                                       help="Submission files, folders of *.py, or manifests (one path a line)."),
    out_dir: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Where triage.jsonl, .md, .csv and each "
                                                                        "submission's report go."),
    depth: str = typer.Option("check", "--depth", metavar="check|run", help="`check` each file (default), or a "
                                                                            "full `run` with probes."),
    problem: Optional[Path] = PROBLEM,
    problems_root: Optional[Path] = PROBLEMS_ROOT,
    task: Optional[str] = TASK,
    budget: Optional[float] = BUDGET,
    compile_budget: Optional[float] = COMPILE_BUDGET,
    small: Optional[bool] = SMALL,
    stages: Optional[str] = STAGES,
    probes: Optional[str] = PROBES,
    scheduler: Optional[str] = typer.Option(None, "--scheduler", metavar="tcp://HOST:PORT",
                                            help="Join a running Dask cluster (workers with --resources GPU=1) "
                                                 "instead of starting one here."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", metavar="N",
                                          help="Workers of the cluster started here (default: one per GPU, else 2)."),
    gpus: Optional[str] = typer.Option(None, "--gpus", metavar="IDS", help="GPUs for the cluster started here."),
):
    """Many submissions at once, each `check` (or `run`) in a process of its own, spread over a Dask cluster with
    one GPU per task. Rows as each ends (triage.jsonl, .md by cause class, .csv); resumable; Ctrl-C keeps them.
    Exit 0 every submission passed, 1 some did not, 2 bad input (or no Dask here), 130 / 143 stopped."""
    from diagnose.errors import BadInput
    if not _have_dask():
        raise BadInput("triage needs Dask, which is not installed here: pip install 'diagnose[triage]'")
    if depth not in ("check", "run"):
        raise BadInput(f"--depth must be check or run, got {depth!r}")
    if workers is not None and workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    opts = Shared.of(ctx.params).check()          # every value, before any file or cluster
    if depth == "check" and (stages is not None or probes is not None):
        raise BadInput("--stages and --probes are for --depth run (`check` runs every stage, and no probe)")
    # the command that resumes this triage: its paths and every setting, as the user gave them
    words = ["diagnose", "triage", *map(str, paths), "--out", str(out_dir)] + (["--depth", depth] if depth != "check"
                                                                             else []) + opts.argv()
    for flag, value in (("--scheduler", scheduler), ("--workers", workers)):
        words += [flag, str(value)] if value is not None else []
    words += opts.argv(("gpus",))
    from diagnose.cli.triage import triage as run_triage
    raise typer.Exit(run_triage(paths, depth, opts, out_dir, scheduler, workers, shlex.join(words)))


def _have_dask() -> bool:
    """Looked up, not imported (`--help` imports no Dask): dask and distributed, both."""
    import importlib.util
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("dask", "distributed"))
    except (ImportError, ValueError):
        return False
