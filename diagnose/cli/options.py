"""The options `run`, `check`, `bisect` and `triage` share, declared once: each flag's typer option here, and one
typed record, `Shared`, that every command builds from what click parsed (`Shared.of(ctx.params)`). The record
checks its values before any work starts (a triage's before its cluster), and writes them back as a child's argv
(each triage task's `diagnose check|run`), so no command parses or spells them a second time."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import typer
import typer.core

from diagnose.errors import BadInput
from diagnose.runs import harness


class _Command(typer.core.TyperCommand):
    """`Usage: diagnose run [OPTIONS] SUBMISSION`, as click and pytest write it (newer typer braces it)."""

    def collect_usage_pieces(self, ctx):
        return [re.sub(r"^\{(.*)\}(\.\.\.)?$", r"\1\2", p) for p in super().collect_usage_pieces(ctx)]


DEFAULT_TASK = "fp8-dual-gemm"
SUBMISSION = typer.Argument(..., metavar="SUBMISSION", show_default=False,
                            help="The submission .py file (defines custom_kernel).")
PROBLEM = typer.Option(None, "--problem", metavar="DIR", help="GPU MODE problem directory (reference.py, task.yml).")
PROBLEMS_ROOT = typer.Option(None, "--problems-root", metavar="DIR",
                             help="A reference-kernels checkout: a submission's `#!POPCORN leaderboard` header finds "
                                  "its problem folder there (default: $DIAGNOSE_PROBLEMS_ROOT).")
TASK = typer.Option(None, "--task", metavar="NAME",
                    help=f"Built-in task, when no --problem is given (default {DEFAULT_TASK}).")
BUDGET = typer.Option(None, "--budget", "-b", metavar="SECONDS",
                      help="Seconds per stage (default: the task's, else 180). The compile step keeps its own.")
COMPILE_BUDGET = typer.Option(None, "--compile-budget", metavar="SECONDS",
                              help="Seconds for the compile step before each stage (default 120, as the harness).")
SMALL = typer.Option(None, "--small/--full-shapes", show_default=False,
                     help="Shape set: the small one or the task's own (default: small without a GPU).")
STAGES = typer.Option(None, "--stages", "-s", metavar="LIST",
                      help=f"Comma-separated stages to run (default {','.join(harness.STAGES)}); 'compile' runs the "
                           f"harness's compile step before each of them.")
PROBES = typer.Option(None, "--probes", "-p", metavar="LIST",
                      help="Comma-separated probes (default: all present); 'none' runs the submission only.")
GPUS = typer.Option(None, "--gpus", metavar="IDS", help="GPU ids to spread runs over, e.g. 0,1.")
JOBS = typer.Option(None, "--jobs", "-j", metavar="N", help="Runs at a time (default from CPUs and memory).")
QUIET = typer.Option(False, "--quiet", "-q", help="Print only the verdict.")
VERBOSE = typer.Option(False, "--verbose", "-v", help="Also print each phase as it ends.")

# the fields that change a submission's answer: a child command is given them, and a triage keys its rows by them;
# the others say where it runs (a triage task's card is its CUDA_VISIBLE_DEVICES, never a --gpus of its child)
ANSWER = ("problem", "problems_root", "task", "budget", "compile_budget", "small", "stages", "probes")


@dataclass(frozen=True)
class Shared:
    """The shared options as the user gave them; None is the command's default."""
    problem: Path | None = None
    problems_root: Path | None = None
    task: str | None = None
    budget: float | None = None
    compile_budget: float | None = None
    small: bool | None = None
    stages: str | None = None
    probes: str | None = None
    gpus: str | None = None
    jobs: int | None = None

    @classmethod
    def of(cls, params: dict) -> Shared:
        """From a command's parsed parameters (click's ctx.params): the fields that command has."""
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls) if f.name in params})

    def but(self, **changes) -> Shared:
        return dataclasses.replace(self, **changes)

    def check(self) -> Shared:
        """Every value, before any work: one BadInput naming the option. The problem folders must exist."""
        positive("--budget", self.budget)
        positive("--compile-budget", self.compile_budget)
        at_least("--jobs", self.jobs, 1)
        stage_list(self.stages)
        probe_list(self.probes)
        gpu_list(self.gpus)
        for flag, path in (("--problem", self.problem), ("--problems-root", self.problems_root)):
            if path is not None and not Path(path).is_dir():
                raise BadInput(f"{flag} {path}: not a directory")
        return self

    def with_paths(self, fn: Callable[[Path], Path]) -> Shared:
        """The same options with each folder's path mapped (resolved, or made relative to where a child runs)."""
        return self.but(**{k: fn(Path(v)) for k in ("problem", "problems_root") if (v := getattr(self, k)) is not None})

    def answer(self) -> dict:
        """What changes a submission's answer, as plain values (a triage's key is made of them)."""
        return {k: (str(v) if isinstance(v, Path) else v) for k in ANSWER if (v := getattr(self, k)) is not None}

    def argv(self, fields: tuple[str, ...] = ANSWER) -> list[str]:
        """These fields as flags that `diagnose` parses back to the same record; defaults are left out."""
        words: list[str] = []
        for name in fields:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "small":
                words.append("--small" if value else "--full-shapes")
            else:
                words += ["--" + name.replace("_", "-"), _word(value)]
        return words


def _word(value) -> str:
    if isinstance(value, float):          # as exact as given: another budget is another answer
        return str(int(value)) if value.is_integer() else repr(value)
    text = str(value)
    return "./" + text if isinstance(value, Path) and text.startswith("-") else text   # else read as an option


def positive(flag: str, val: float | None) -> None:
    if val is not None and not (math.isfinite(val) and val > 0):
        raise BadInput(f"{flag} must be a finite positive number, got {val:g}")


def at_least(flag: str, val: int | None, low: int) -> None:
    if val is not None and val < low:
        raise BadInput(f"{flag} must be at least {low}, got {val}")


def stage_list(spec: str | None) -> tuple[list[str], bool]:
    """The stages to run, and whether the harness's compile step runs before each ("compile" in the list)."""
    names = [s.strip() for s in (spec if spec is not None else ",".join(harness.STAGES)).split(",") if s.strip()]
    bad = [s for s in names if s not in harness.STAGES]
    if bad or not names:
        raise BadInput(f"--stages: unknown stage {', '.join(bad) or '(none)'}; choose from {', '.join(harness.STAGES)}")
    stages = [s for s in harness.JUDGED if s in names]
    if not stages:
        raise BadInput("--stages compile: the compile step runs before each stage and decides nothing by itself; "
                       "add a stage (test, benchmark, leaderboard)")
    return stages, "compile" in names


def probe_list(spec: str | None) -> list[str] | None:
    if spec is None:
        return None
    from probes.door import known
    names = [p.strip() for p in spec.split(",") if p.strip()]
    if names == ["none"]:
        return []
    unknown = [p for p in names if not known(p)]
    if unknown or not names:
        raise BadInput(f"--probes: unknown probe {', '.join(unknown) or '(none)'}; see `diagnose probes`")
    return names


def gpu_list(spec: str | None) -> list[str]:
    """GPU ids, each checked against what this machine has."""
    if not spec:
        return []
    from diagnose.runs import device
    ids = [g.strip() for g in spec.split(",") if g.strip()]
    have = device.gpu_count()
    if not have:
        raise BadInput(f"--gpus {spec}: this machine has no GPU")
    bad = [g for g in ids if not g.isdigit() or int(g) >= have]
    if bad or not ids:
        raise BadInput(f"--gpus: no GPU {', '.join(bad) or '(none)'} here; this machine has GPUs 0–{have - 1}")
    return ids
