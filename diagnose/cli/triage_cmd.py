"""The `triage` command's options (its work is cli/triage.py's), registered on the app when the CLI starts."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

import typer

from diagnose.cli.options import BUDGET, COMPILE_BUDGET, PROBLEM, PROBLEMS_ROOT, SMALL, TASK, _Command


def register(app) -> None:
    app.command(cls=_Command)(triage)


def triage(
    paths: List[Path] = typer.Argument(..., metavar="PATH", show_default=False,
                                       help="Submission files, folders of *.py, or manifests (one path a line)."),
    out_dir: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="Where triage.jsonl, .md, .csv and each "
                                                                        "submission's report go."),
    depth: str = typer.Option("check", "--depth", metavar="check|run", help="`check` each file (default), or a "
                                                                            "full `run` with probes."),
    problem: Optional[Path] = PROBLEM,
    problems_root: Optional[Path] = PROBLEMS_ROOT,
    task: Optional[str] = typer.Option(None, "--task", metavar="NAME", help=TASK.help),
    budget: Optional[float] = BUDGET,
    compile_budget: Optional[float] = COMPILE_BUDGET,
    small: Optional[bool] = SMALL,
    scheduler: Optional[str] = typer.Option(None, "--scheduler", metavar="tcp://HOST:PORT",
                                            help="Join a running Dask cluster (workers with --resources GPU=1) "
                                                 "instead of starting one here."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", metavar="N",
                                          help="Workers of the cluster started here (default: one per GPU, else 2)."),
    gpus: Optional[str] = typer.Option(None, "--gpus", metavar="LIST", help="GPUs for the cluster started here."),
):
    """Many submissions at once, each `check` (or `run`) in a process of its own, spread over a Dask cluster with
    one GPU per task. Rows as each ends (triage.jsonl, .md by cause class, .csv); resumable; Ctrl-C keeps them.
    Exit 0 every submission passed, 1 some did not, 2 bad input (or no Dask here), 130 / 143 stopped."""
    from diagnose.errors import BadInput
    if not _have_dask():
        raise BadInput("triage needs Dask, which is not installed here: pip install 'diagnose[triage]'")
    from diagnose.cli.triage import triage as run_triage
    if workers is not None and workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    opts = dict(depth=depth, problem=problem, problems_root=problems_root, task=task, budget=budget,
                compile_budget=compile_budget, small=small)
    resume = _command(paths, out_dir, depth, problem, problems_root, task, budget, compile_budget, small, scheduler,
                      workers, gpus)
    raise typer.Exit(run_triage(paths, opts, out_dir, scheduler, workers, gpus, resume))


def _have_dask() -> bool:
    """Looked up, not imported (`--help` imports no Dask): dask and distributed, both."""
    import importlib.util
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("dask", "distributed"))
    except (ImportError, ValueError):
        return False


def _command(paths, out_dir, depth, problem, problems_root, task, budget, compile_budget, small, scheduler,
             workers, gpus) -> str:
    """The command line that resumes this triage: its paths and every setting, as the user gave them."""
    def num(v: float) -> str:             # as exact as given: another budget is another key
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    words = ["diagnose", "triage", *map(str, paths), "--out", str(out_dir)]
    for flag, value in (("--depth", None if depth == "check" else depth), ("--problem", problem),
                        ("--problems-root", problems_root), ("--task", task),
                        ("--budget", None if budget is None else num(budget)),
                        ("--compile-budget", None if compile_budget is None else num(compile_budget)),
                        ("--scheduler", scheduler), ("--workers", workers), ("--gpus", gpus)):
        if value is not None:
            words += [flag, str(value)]
    if small is not None:
        words.append("--small" if small else "--full-shapes")
    return shlex.join(words)
