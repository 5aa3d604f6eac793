"""The options and the command class every command of the CLI shares (app.py's and triage_cmd.py's)."""
from __future__ import annotations

import re

import typer
import typer.core


class _Command(typer.core.TyperCommand):
    """`Usage: diagnose run [OPTIONS] SUBMISSION`, as click and pytest write it (newer typer braces it)."""

    def collect_usage_pieces(self, ctx):
        return [re.sub(r"^\{(.*)\}(\.\.\.)?$", r"\1\2", p) for p in super().collect_usage_pieces(ctx)]


SUBMISSION = typer.Argument(..., metavar="SUBMISSION", show_default=False,
                            help="The submission .py file (defines custom_kernel).")
PROBLEM = typer.Option(None, "--problem", metavar="DIR", help="GPU MODE problem directory (reference.py, task.yml).")
TASK = typer.Option("fp8-dual-gemm", "--task", metavar="NAME", help="Built-in task, when no --problem is given.")
BUDGET = typer.Option(None, "--budget", "-b", metavar="SECONDS",
                      help="Seconds per stage (default: the task's, else 180). The compile step keeps its own.")
COMPILE_BUDGET = typer.Option(None, "--compile-budget", metavar="SECONDS",
                              help="Seconds for the compile step before each stage (default 120, as the harness).")
SMALL = typer.Option(None, "--small/--full-shapes", show_default=False,
                     help="Shape set: the small one or the task's own (default: small without a GPU).")
QUIET = typer.Option(False, "--quiet", "-q", help="Print only the verdict.")
VERBOSE = typer.Option(False, "--verbose", "-v", help="Also print each phase as it ends.")
PROBLEMS_ROOT = typer.Option(None, "--problems-root", metavar="DIR",
                             help="A reference-kernels checkout: a submission's `#!POPCORN leaderboard` header finds "
                                  "its problem folder there (default: $DIAGNOSE_PROBLEMS_ROOT).")
