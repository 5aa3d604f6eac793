"""Command line: `diagnose run | check | bisect | probes | report | triage`. The only module that writes files.

Exit codes: exits.py, the one place they are defined; `--help` prints its table.

Commands stay thin: the options they share are one record (options.py), which checks them; the rest of checking
inputs is prepare.py's, running is the engine's, what is printed is the renderers'. Every bad value, typer's own
type errors included, ends as one `error:` line and exit 2.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.markup import escape

import diagnose
from diagnose.cli.exits import BAD_INPUT, CANNOT_JUDGE, INTERNAL, help_text, stopped_code
from diagnose.cli.options import (
    BUDGET,
    COMPILE_BUDGET,
    GPUS,
    JOBS,
    PROBES,
    PROBLEM,
    PROBLEMS_ROOT,
    QUIET,
    SMALL,
    STAGES,
    SUBMISSION,
    TASK,
    VERBOSE,
    Shared,
    _Command,
)
from diagnose.cli.wiring import check_settings, diagnose_prepared, engine_pass, err, out, refused, say_failed
from diagnose.errors import BadInput, CannotStart, Refused

try:   # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer
    from click import exceptions as _cx


_NO_ARGS = getattr(_cx, "NoArgsIsHelpError", ())   # click >= 8.2: `diagnose` alone shows the help
_ABORT = getattr(_cx, "Abort", KeyboardInterrupt)   # not in every click's exceptions module

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
                  epilog=help_text(), help="Find out why a GPU kernel submission times out or crashes, with "
                                           "measurements and a tested fix.")


def _version(value: bool) -> None:
    if value:
        out.print(f"diagnose {diagnose.__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Show the version and exit.")):
    """Find out why a GPU kernel submission times out or crashes, with measurements and a tested fix."""


RUNNER = typer.Option(None, "--runner", hidden=True, metavar="scripted:FILE",
                      help="Replay scripted stage results instead of starting processes (tests).")


@app.command(cls=_Command, epilog=help_text())
def run(
    ctx: typer.Context,
    submission: Path = SUBMISSION,
    problem: Optional[Path] = PROBLEM,
    problems_root: Optional[Path] = PROBLEMS_ROOT,
    task: Optional[str] = TASK,
    budget: Optional[float] = BUDGET,
    compile_budget: Optional[float] = COMPILE_BUDGET,
    stages: Optional[str] = STAGES,
    full: bool = typer.Option(False, "--full", help="Run every benchmark repeat for real instead of predicting."),
    probes: Optional[str] = PROBES,
    jobs: Optional[int] = JOBS,
    repeat: int = typer.Option(1, "--repeat", metavar="N", help="Run the baseline and each variant N times."),
    gpus: Optional[str] = GPUS,
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR",
                                           help="Output directory (default reports/<stem>-<time>)."),
    fix: Optional[Path] = typer.Option(None, "--fix", metavar="FILE",
                                       help="Write the verified fix's full source here."),
    max_rss: Optional[float] = typer.Option(None, "--max-rss", metavar="MB",
                                            help="Kill a run whose process tree passes this many MB."),
    keep: bool = typer.Option(False, "--keep", help="Keep each run's temporary directory."),
    sample_repeats: int = typer.Option(10, "--sample-repeats", metavar="N",
                                       help="Timed repeats per benchmark case when predicting."),
    small: Optional[bool] = SMALL,
    no_sample: bool = typer.Option(False, "--no-sample", help="Turn off the line sampler (to measure its own cost)."),
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
    runner: Optional[str] = RUNNER,
):
    """Run a submission as the harness would, probe every suspect, and report ranked causes and a fix."""
    from diagnose.cli.exits import exit_code
    from diagnose.cli.files import OutDir, write_atomic
    from diagnose.cli.prepare import Inputs, prepare
    prep = prepare(Inputs(submission, Shared.of(ctx.params), full=full, max_rss=max_rss, keep=keep,
                          sample_repeats=sample_repeats, sample=not no_sample, repeat=repeat))
    if fix is not None and fix.is_dir():
        raise BadInput(f"--fix {fix}: is a directory; give a file name")
    outdir = OutDir(out_dir or Path("reports") / f"{prep.sub.stem}-{dt.datetime.now():%Y%m%d-%H%M%S-%f}",
                    "--out")
    eng, code = diagnose_prepared(prep, outdir, quiet, verbose, runner)
    session = prep.session
    if fix and session.fix:
        write_atomic(fix, eng.sources[session.fix.run])
    if code:
        err.print(f"interrupted: partial report written to {escape(str(outdir.path))}")
        raise typer.Exit(stopped_code(code - 128))
    raise typer.Exit(exit_code(session))


@app.command(cls=_Command, epilog=help_text())
def check(
    ctx: typer.Context,
    submission: Path = SUBMISSION,
    problem: Optional[Path] = PROBLEM,
    problems_root: Optional[Path] = PROBLEMS_ROOT,
    task: Optional[str] = TASK,
    budget: Optional[float] = BUDGET,
    compile_budget: Optional[float] = COMPILE_BUDGET,
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR",
                                           help="Also write session.json and report.md here."),
    small: Optional[bool] = SMALL,
    cpu_cap: Optional[float] = typer.Option(None, "--cpu-cap", metavar="S", help="Without a GPU (no time is judged "
                                            "there): how long each stage may run to its checks (default 300 s)."),
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
    runner: Optional[str] = RUNNER,
):
    """Pre-submit check: the static scan plus one cold predicted harness pass, no probes. It ends in one word:
    SAFE (PASSED ON CPU without a GPU), AT RISK, FAILS, INCONCLUSIVE, INTERRUPTED or CANNOT JUDGE HERE."""
    from diagnose.cli.exits import check_exit
    from diagnose.cli.files import OutDir
    from diagnose.cli.prepare import Inputs, prepare
    from diagnose.output.console import check_header, check_lines
    from probes.door import static_risks
    check_settings(None, cpu_cap)       # its value checked before anything starts
    prep = prepare(Inputs(submission, Shared.of(ctx.params).but(jobs=1, probes="none"), sample_repeats=5))
    outdir = OutDir(out_dir, "--out") if out_dir else None
    if not quiet:
        out.print(check_header(prep.session.submission["path"], prep.board, prep.folder, prep.settings.budgets))
    eng, save, code = engine_pass(prep, check_settings(prep, cpu_cap), outdir, quiet, verbose, runner)
    cl = eng.claims()
    failed = save(prep.session, cl)
    signum = code - 128 if code else None
    lines, word = check_lines(prep.session, static_risks(prep.session.scan), prep.session.submission["path"],
                              prep.settings.gpu, quiet=quiet, errors=eng.errors,
                              stopped=signal.Signals(signum).name if signum else None, cl=cl)
    for line in lines:
        out.print(line)
    say_failed(prep.session, failed, cl)
    raise typer.Exit(check_exit(word, signum))


@app.command(cls=_Command)
def bisect(
    ctx: typer.Context,
    good: Path = typer.Argument(..., metavar="GOOD", show_default=False,
                                help="The version that passes (with --git: the file, at both revisions)."),
    bad: Optional[Path] = typer.Argument(None, metavar="BAD", show_default=False, help="The version that fails."),
    git: Optional[str] = typer.Option(None, "--git", metavar="REV_GOOD..REV_BAD", help="Take both versions of GOOD "
                                                                                      "from git."),
    problem: Optional[Path] = PROBLEM,
    problems_root: Optional[Path] = PROBLEMS_ROOT,
    task: Optional[str] = TASK,
    budget: Optional[float] = BUDGET,
    compile_budget: Optional[float] = COMPILE_BUDGET,
    stages: Optional[str] = STAGES,
    jobs: Optional[int] = JOBS,
    small: Optional[bool] = SMALL,
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="Output directory."),
    no_diagnose: bool = typer.Option(False, "--no-diagnose", help="Stop at the minimal edits (no diagnosis of them)."),
    quiet: bool = QUIET,
    verbose: bool = VERBOSE,
    runner: Optional[str] = RUNNER,
):
    """Which edits between GOOD and BAD make it fail: the minimal set, tested, then diagnosed. Exit 0 found,
    1 none verified, 2 bad input, 3 cannot be judged here."""
    from diagnose.cli.bisect import bisect as bisect_edits
    opts = Shared.of(ctx.params).check()         # before the output folder is made
    raise typer.Exit(bisect_edits(good, bad, git, opts, out_dir, not no_diagnose, quiet, verbose, runner))


@app.command("probes", cls=_Command)
def probes_cmd(fmt: str = typer.Option("table", "--format", "-f", metavar="FORMAT",
                                        help="table | md (the README's probe table is this output)")):
    """List the probe registry."""
    from diagnose.engine import probe_table
    from diagnose.output.console import probes_markdown, probes_table
    if fmt not in ("table", "md"):
        raise BadInput(f"--format must be table or md, got {fmt!r}")
    if fmt == "md":
        sys.stdout.write(probes_markdown(probe_table()))
        return
    out.print(probes_table(probe_table()))


@app.command(cls=_Command)
def report(
    session_file: Path = typer.Argument(..., metavar="SESSION_JSON", show_default=False,
                                        help="A session.json written by `diagnose run`."),
    fmt: str = typer.Option("md", "--format", "-f", metavar="FORMAT", help="md | json | trace"),
    audit: bool = typer.Option(False, "--audit", help="Check every conclusion against the session's own runs "
                                                      "instead: exit 1 naming each one they cannot bear."),
):
    """Re-render a saved session offline (no run), or audit its conclusions (--audit)."""
    from diagnose.output import RENDERERS
    from diagnose.session import Session
    if fmt not in RENDERERS:
        raise BadInput(f"--format must be one of {', '.join(RENDERERS)}, got {fmt!r}")
    try:
        data = json.loads(session_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{session_file}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{session_file}: is a directory; give its session.json") from None
    except (ValueError, UnicodeDecodeError, OSError):
        raise BadInput(f"{session_file}: not a diagnose session (not a JSON file)") from None
    if not isinstance(data, dict) or "schema_version" not in data or "verdict" not in data:
        raise BadInput(f"{session_file}: not a diagnose session (JSON, but no schema_version and verdict)")
    try:
        session = Session.from_dict(data)
    except (ValueError, TypeError, KeyError) as e:
        raise BadInput(f"{session_file}: a diagnose session this version cannot read: "
                       f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if audit:
        from diagnose.analysis.audit.audit import audit_claims
        checked, loose = audit_claims(session)
        for claim, found in checked:
            runs = ", ".join(claim.runs) or "no runs"
            out.print(escape(f"{'ok' if not found else 'UNSUPPORTED':11} {claim.key} (runs {runs}; rules "
                             f"{', '.join(claim.rules)})"))
            for f in found:
                out.print(escape(f"            [{f.rule}] {f.missing}"))
        for f in loose:
            out.print(escape(f"UNSUPPORTED {f}"))
        bad = sum(1 for _, found in checked if found) + len(loose)
        out.print(f"{bad} unsupported claim(s) of {len(checked)}" if bad else
                  f"all {len(checked)} claim(s) are supported by the session's runs")
        raise typer.Exit(1 if bad else 0)
    sys.stdout.write(RENDERERS[fmt](session))


def _error(msg: str, code: int = BAD_INPUT) -> int:
    err.print(f"[bold red]error:[/] {escape(msg)}")
    return code


def _cannot_start(e: CannotStart) -> int:
    """No run can start here (engine/preflight.py): one line, no report; ours unless a package is missing."""
    if e.missing is None:
        return _error(f"internal error (a fault of diagnose, not the submission's): {e}", INTERNAL)
    err.print(escape(f"CANNOT JUDGE HERE: {e}"))
    return CANNOT_JUDGE


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors (typer's too) and BadInput become one `error:` line and exit 2."""
    from diagnose.cli.triage_cmd import register
    register(app)
    try:
        rv = app(argv, standalone_mode=False, prog_name="diagnose")
    except _NO_ARGS as e:
        out.print(e.ctx.get_help() if e.ctx else "")
        sys.exit(BAD_INPUT)
    except _cx.UsageError as e:
        sys.exit(_error(e.format_message().replace("\n", " ")))
    except BadInput as e:
        sys.exit(_error(str(e)))
    except Refused as e:
        sys.exit(refused(e))
    except CannotStart as e:
        sys.exit(_cannot_start(e))
    except (_ABORT, KeyboardInterrupt):
        sys.exit(stopped_code(signal.SIGINT))
    except _cx.ClickException as e:
        sys.exit(_error(e.format_message(), e.exit_code))
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line (the traceback with DIAGNOSE_DEBUG=1)
        if os.environ.get("DIAGNOSE_DEBUG"):
            raise
        sys.exit(_error(f"internal error (a bug in diagnose): {type(e).__name__}: {e}", INTERNAL))
    sys.exit(rv if isinstance(rv, int) else 0)
