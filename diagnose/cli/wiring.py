"""What the CLI's commands share: stopping on SIGINT or SIGTERM with the right exit code, progress fitted to
where it runs, and the engine wired to its runner (the processes, or a scripted replay) and to the files the
CLI writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from diagnose.cli.exits import REFUSED
from diagnose.errors import BadInput, CannotStart, Refused

# Piped (a CI log), a table is not squeezed into 80 columns, where its notes would wrap mid-sentence.
PIPED_WIDTH = 160
err = Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else PIPED_WIDTH)
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else PIPED_WIDTH)


def _plain() -> bool:
    """Piped, or under CI: plain lines, no live display."""
    return bool(os.environ.get("CI")) or not err.is_terminal


class Signals:
    """SIGINT / SIGTERM stop the runs (children are killed by the runner) and remember the exit code."""

    def __init__(self):
        self.stop, self.code = threading.Event(), None

    def __enter__(self):
        self.prev = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum, frame):
        self.code = 128 + signum
        self.stop.set()

    def __exit__(self, *exc):
        for s, h in self.prev.items():
            signal.signal(s, h)


def progress_for(prep, verbosity: int):
    from diagnose.cli.progress import LiveProgress, PlainProgress, Progress
    # the problem's reference check is never reported done (it is the preflight's, not a run of the submission)
    budgets = prep.settings.budgets
    planned = lambda: sum(1 for r in list(prep.session.runs) if str(r.role) != "reference")   # noqa: E731
    if verbosity < 0:
        p, shown = Progress(budgets, planned), contextlib.nullcontext()
    elif _plain() or verbosity > 0:
        p, shown = PlainProgress(budgets, planned, sys.stderr, verbose=verbosity > 0), contextlib.nullcontext()
    else:
        from rich.live import Live
        p = LiveProgress(budgets, planned)
        shown = Live(p, console=err, refresh_per_second=4, transient=False)
    p.cap = prep.session.harness.get("cpu_cap_s")
    return p, shown


def _runner(spec: str | None, settings, progress):
    """The processes the harness would start, or (hidden, for exact end-to-end tests) a scripted replay."""
    if spec is None:
        from diagnose.runs.runner.stages import StageRunner
        return StageRunner(settings, concurrent=settings.jobs > 1, on_event=progress.on_event)
    kind, _, path = spec.partition(":")
    if kind != "scripted" or not path:
        raise BadInput(f"--runner must be scripted:FILE, got {spec!r}")
    from diagnose.runs.runner.scripted import from_file
    try:
        return from_file(Path(path))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"--runner {path}: not a runner script: {type(e).__name__}: {e}") from None


def engine_for(prep, settings, stop, outdir, progress, runner_spec=None):
    """The engine for this command's settings (`prep.settings`, or check's and bisect's own `but(...)`)."""
    from diagnose.cli.files import Saver
    from diagnose.engine import Engine
    from diagnose.engine.observer import Observers
    saver = Saver(outdir)
    # the out folder is the CLI's alone: no run sees it (the run's jail hides it)
    hidden = (*settings.hidden, *([str(outdir.path.resolve())] if outdir is not None else []))
    runner = _runner(runner_spec, settings.but(hidden=tuple(dict.fromkeys(hidden))), progress)
    eng = Engine(prep.sub, prep.session, settings, runner, observer=Observers(progress, saver), stop=stop)
    return eng, saver.now


WALLS = ("/tmp", "/dev/shm", "/var/tmp")


def walled_off(runner, session) -> None:
    """Before any run: where this machine cannot give a run a private /tmp (no mount namespace), say so in the
    first lines, and in the report: /tmp is then this machine's, and a run that reads it proves nothing. So too
    a GPU other than the one the submission's header or the problem names."""
    from diagnose.analysis.verdict.target import mismatch
    other = mismatch(session)
    if other:
        session.notes.append(other)
        err.print(other)
    check = getattr(runner, "isolation", None)
    if check is None:
        return
    walls = check()
    # which places were walled off, not where this machine keeps things
    session.harness["isolation"] = {"namespace": walls.get("namespace"), "private": walls.get("private") or [],
                                    "why": walls.get("why"), "home_private": bool(walls.get("home")),
                                    "read_only": len(walls.get("read_only") or []),
                                    "missing": list(walls.get("missing") or [])}
    shared = [p for p in WALLS if p not in (walls.get("private") or [])]
    if shared:
        line = (f"isolation: {', '.join(shared)} {'is' if len(shared) == 1 else 'are'} this machine's, not private "
                f"to each run ({walls.get('why') or 'no mount namespace'}): a run that reads state there is "
                f"inconclusive, never OK")
        session.notes.append(line)
        err.print(line)
    if walls.get("missing"):
        line = (f"isolation: each run lacks {', '.join(walls['missing'])} here ({walls.get('why') or 'refused'}): "
                f"what a submission does may reach beyond its run")
        session.notes.append(line)
        err.print(line)


def verbosity(quiet: bool, verbose: bool) -> int:
    return -1 if quiet else (1 if verbose else 0)


def check_settings(prep, cpu_cap: float | None):
    """check's settings: no confirmation reruns; and without a GPU, where no time decides anything, each judged stage
    runs to its checks up to a cap (--cpu-cap, default harness.CPU_CHECK_CAP_S) instead of its budget, which the
    session records for the output to say. Its default is $DIAGNOSE_CPU_CAP where set (a triage's checks inherit
    it). With no prep, only the value is checked."""
    from diagnose.cli.options import positive
    from diagnose.runs.harness import CPU_CHECK_CAP_S
    raw = os.environ.get("DIAGNOSE_CPU_CAP", "").strip()
    if cpu_cap is None and raw:
        try:
            cpu_cap = float(raw)
        except ValueError:
            raise BadInput(f"DIAGNOSE_CPU_CAP={raw!r}: not a number of seconds") from None
    positive("--cpu-cap" if raw == "" else "--cpu-cap (or DIAGNOSE_CPU_CAP)", cpu_cap)
    if prep is None:
        return None
    cap = None if prep.settings.gpu else cpu_cap or CPU_CHECK_CAP_S
    if cap:
        prep.session.harness["cpu_cap_s"] = cap
    return prep.settings.but(confirm=False, cpu_cap_s=cap)


def engine_pass(prep, settings, outdir, quiet: bool, verbose: bool, runner_spec=None):
    """One pass of the engine over a prepared submission with these settings: progress, signals, the engine and
    its files (a problem that needs more GPUs than here gets its verdict with no run); our own failures said
    once, and the verdict of a pass a signal stopped settled on what finished. Returns the engine, the session's
    saver and the exit code of a signal that stopped it."""
    progress, shown = progress_for(prep, verbosity(quiet, verbose))
    with Signals() as sig:
        eng, save = engine_for(prep, settings, sig.stop, outdir, progress, runner_spec=runner_spec)
        try:
            if eng.can_judge():
                walled_off(eng.runner, prep.session)
                with shown:
                    eng.diagnose()
        except (BadInput, CannotStart):
            if outdir is not None:      # nothing was run that a report could hold
                outdir.drop()
            raise
    if eng.errors:
        err.print(f"internal error: diagnose failed on {len(eng.errors)} run(s); those runs are marked incomplete "
                  f"and were not used as evidence")
    eng.ended(stopped_by=sig.code - 128 if sig.code else None)
    return eng, save, sig.code


def say_failed(session, failed: list[str], cl: list | None = None) -> None:
    """One line for the parts of diagnose that failed around a diagnosis that stands: a renderer, a probe's
    figures. The runs and the verdict are intact, so the exit code stays the diagnosis's. `cl`: the claims as the
    engine settled them (derived again where None)."""
    from diagnose.analysis.audit import claims
    said = failed + [f"{c.title}'s figures" for c in claims.failures(claims.derive(session) if cl is None else cl)]
    if said:
        err.print(escape(f"error: part of the output failed (a bug in diagnose): {'; '.join(said)}; session.json "
                         f"holds every run"))


def diagnose_prepared(prep, outdir, quiet: bool, verbose: bool, runner_spec=None):
    """One full diagnosis of a prepared submission (`run`, and `bisect` for GOOD plus its minimal edits):
    the engine's pass, the summary printed.
    Returns the engine (its session and variant sources) and the exit code of a signal that stopped it."""
    from diagnose.output.console import run_summary
    session = prep.session
    eng, save, code = engine_pass(prep, prep.settings, outdir, quiet, verbose, runner_spec)
    cl = eng.claims()       # settled once: the files, the summary and the failures' line all state these
    failed = save(session, cl)
    for line in run_summary(session, str(outdir.path / "report.md"), quiet=quiet, cl=cl):
        out.print(line)
    say_failed(session, failed, cl)
    return eng, code


def refused(e: Refused) -> int:
    """KernelBot's refusal, as the harness words it, then where in the file and what passes instead."""
    for msg in dict.fromkeys(r.message for r in e.reasons):
        out.print(f"[bold red]REFUSED[/] by KernelBot before any run: {escape(msg)}")
        for r in (x for x in e.reasons if x.message == msg):
            out.print(f"  {escape(e.path)}: {escape(r.describe())}")
    return REFUSED
