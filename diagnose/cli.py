"""Command line: `diagnose run | check | probes | report`. The only module that writes files.

Exit codes: 0 ok, 1 a problem was found (timeout, crash, wrong result, at risk, tampering), 2 bad input or
usage, 3 this machine cannot judge the submission (it needs a GPU this machine lacks), 130 / 143
interrupted by SIGINT / SIGTERM (the partial session and report are written first).
"""
from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

import diagnose
from diagnose import device, harness
from diagnose.errors import BadInput

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find out why a GPU kernel submission times out or crashes, with measurements and a "
                       "tested fix.")
err = Console(stderr=True)
out = Console()


def _fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _stages(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [s for s in names if s not in harness.STAGES]
    if bad or not names:
        raise BadInput(f"--stages: unknown stage {', '.join(bad) or '(none)'}; choose from {', '.join(harness.STAGES)}")
    return [s for s in harness.STAGES if s in names]


class _Signals:
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


def _prepare(submission: Path, problem, task, budget, stages, full, max_rss, keep, sample_repeats, small,
             compile_budget=None):
    from diagnose.runner.stages import RunSettings
    from diagnose.submission import load_submission
    from diagnose.tasks.loader import load_task
    for flag, val in (("--budget", budget), ("--compile-budget", compile_budget), ("--max-rss", max_rss)):
        if val is not None and not (val > 0 and val != float("inf")):
            raise BadInput(f"{flag} must be a finite positive number, got {val:g}")
    sub = load_submission(submission)
    gpu = device.has_gpu()
    t = load_task(problem, task, small=small if small is not None else not gpu)
    settings = RunSettings(task=t, stages=_stages(stages), budgets=harness.stage_budgets(budget, t.timeouts, compile_budget),
                           depth="full" if full else "predict", sample_repeats=sample_repeats,
                           max_rss_mb=max_rss, keep=keep)
    return sub, gpu, settings


def _new_session(sub, settings, gpu, command):
    from diagnose.scan import scan_source
    from diagnose.session import Session
    return Session(
        submission={"path": _shown_path(sub.path), "name": sub.path.name, "sha256": sub.sha256, "source": sub.source},
        task={**settings.task.to_dict(), "directory": "(built-in)" if settings.task.builtin else settings.task.directory,
              "files": [[n, s if s == "@SUBMISSION@" else _shown_path(Path(s))] for n, s in settings.task.files]},
        command=command, tool_version=diagnose.__version__,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        harness={"name": "gpumode", "depth": settings.depth, "stages": settings.stages, "budgets": settings.budgets,
                 "cpu_only": not gpu, "sample_repeats": settings.sample_repeats, "evaluator": _evaluator(settings.task)},
        scan=scan_source(sub.source, sub.tree).to_list())


def _evaluator(t) -> str:
    if t.evaluator:
        return (f"the problem's own {t.evaluator} (from {t.evaluator_source}), run as the harness runs it; it decides "
                f"inputs, repeats, flush, seeds and checks")
    return ("diagnose's model of GPU MODE's eval_better_bench.py: 50 inputs per case, CUDA events around 50 calls, "
            "an L2 flush per repeat, the stopping rule" + ("" if t.builtin else " (the folder ships no evaluator)"))


def _shown_path(p: Path) -> str:
    """The submission's path as a user would write it: relative to the working directory when inside it."""
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _out_dir(out_opt: Optional[Path], stem: str) -> Path:
    if out_opt:
        return out_opt
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return Path("reports") / f"{stem}-{stamp}"


def _finish(session, outdir: Path) -> None:
    from diagnose.output import save_all
    events = [e for r in session.runs for s in r.stages for e in s.events if e["k"] in ("env", "flush")]
    env = next((e for e in events if e["k"] == "env"), None)
    if env:
        session.environment = {k: v for k, v in env.items() if k not in ("k", "t", "pid")}
    flushes = [e for e in events if e["k"] == "flush"]
    if flushes:
        lo, hi = min(e["bytes"] for e in flushes), max(e["bytes"] for e in flushes)
        want = flushes[0]["wanted"]
        session.harness["flush"] = "none (CPU)" if flushes[0].get("device") == "cpu" else (
            f"{lo / 2**30:.1f}–{hi / 2**30:.1f} GiB per repeat" +
            (f", scaled down from the harness's {want / 2**30:.1f} GiB to fit the device's free memory"
             if lo < want else ""))
    save_all(outdir, session)


def _problem_options(settings) -> dict:
    """What a problem folder changes about a diagnosis: its reference is checked alone first; a folder
    that ships its own evaluator has it decide the timing, and those stages run with nothing beside them."""
    t = settings.task
    return {"preflight": not t.builtin, "solo_stages": ("benchmark", "leaderboard") if t.evaluator else (),
            "problem": t.directory, "gpus_for": t.gpus}


def _cannot_judge(session, settings) -> bool:
    """A multi-GPU problem on a machine with too few GPUs: say so, with no run."""
    from diagnose.session import Status, Verdict
    need, have = settings.task.world_size, device.gpu_count()
    if need <= 1 or need <= have:
        return False
    session.verdict = Verdict(Status.NEEDS_GPU, message=f"this problem needs {need} GPUs; this machine has {have}",
                              note="a multi-GPU problem runs one process per rank: run it on a machine with "
                                   f"{need} GPUs")
    session.complete = True
    return True


def _print(lines) -> None:
    for line in lines:
        out.print(line, highlight=False, soft_wrap=True)


@app.command()
def run(
    submission: Path = typer.Argument(..., help="The submission .py file (defines custom_kernel)."),
    problem: Optional[Path] = typer.Option(None, "--problem", help="GPU MODE problem directory (reference.py, task.yml)."),
    task: str = typer.Option("fp8-dual-gemm", "--task", help="Built-in task, when no --problem is given."),
    budget: Optional[float] = typer.Option(None, "--budget", help="Seconds per stage (default 180; compile step 120)."),
    compile_budget: Optional[float] = typer.Option(None, "--compile-budget", help="Seconds for the compile step (default 120)."),
    stages: str = typer.Option(",".join(harness.STAGES), "--stages", help="Comma-separated stages to run."),
    full: bool = typer.Option(False, "--full", help="Run every benchmark repeat for real instead of predicting."),
    probes: Optional[str] = typer.Option(None, "--probes", help="Comma-separated probes (default: all present); "
                                                                "'none' runs the submission only."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="Runs at a time (default from CPUs and memory)."),
    repeat: int = typer.Option(1, "--repeat", help="Run the baseline and each variant N times (median, spread)."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU ids to spread runs over, e.g. 0,1."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Output directory (default reports/<stem>-<time>)."),
    fix: Optional[Path] = typer.Option(None, "--fix", help="Write the verified fix's full source here."),
    max_rss: Optional[float] = typer.Option(None, "--max-rss", help="Kill a run whose process tree passes this many MB."),
    keep: bool = typer.Option(False, "--keep", help="Keep each run's temporary directory."),
    sample_repeats: int = typer.Option(10, "--sample-repeats", help="Timed repeats per benchmark case when predicting."),
    small: Optional[bool] = typer.Option(None, "--small/--full-shapes", help="Shape set (default: small without a GPU)."),
    no_sample: bool = typer.Option(False, "--no-sample", help="Turn off the line sampler (to measure its own cost)."),
):
    """Run a submission as the harness would, probe every suspect, and report ranked causes and a fix."""
    from diagnose.engine import Engine, Options
    from diagnose.live import LiveState
    from diagnose.runner.stages import StageRunner
    from probes import BY_NAME
    try:
        if repeat < 1 or (jobs is not None and jobs < 1) or sample_repeats < 2:
            raise BadInput("--repeat and --jobs must be at least 1, --sample-repeats at least 2")
        sub, gpu, settings = _prepare(submission, problem, task, budget, stages, full, max_rss, keep,
                                      sample_repeats, small, compile_budget)
        settings.sample = not no_sample
        names = None
        if probes is not None:
            names = [p.strip() for p in probes.split(",") if p.strip()]
            if names == ["none"]:
                names = []
            unknown = [p for p in names if p not in BY_NAME]
            if unknown:
                raise BadInput(f"--probes: unknown probe {', '.join(unknown)}; see `diagnose probes`")
        gpu_ids = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else []
    except BadInput as e:
        _fail(str(e))
    outdir = _out_dir(out_dir, sub.stem)
    session = _new_session(sub, settings, gpu, ["diagnose"] + sys.argv[1:])
    njobs = jobs or device.default_jobs()
    session.harness["concurrency"] = f"up to {njobs} run(s) at once" + (f" over GPUs {gpus}" if gpus else "")
    live_state = LiveState(settings.budgets)
    save_lock = threading.Lock()

    def save(s):
        with save_lock:
            _finish(s, outdir)
    from diagnose.renderers.console import exit_code, run_summary
    if _cannot_judge(session, settings):
        save(session)
        _print(run_summary(session, str(outdir / "report.md")))
        raise typer.Exit(exit_code(session))
    if settings.task.world_size > 1:
        njobs = 1      # the evaluator takes every GPU for its ranks
    with _Signals() as sig:
        opts = Options(probes=names, jobs=njobs, repeat=repeat, gpu=gpu, bisect=names != [],
                       **_problem_options(settings))
        runner = StageRunner(settings, gpus=gpu_ids or [None], concurrent=njobs > 1, on_event=live_state.on_event)
        eng = Engine(sub, session, settings.stages, opts, runner, on_save=save, stop=sig.stop,
                     on_run_done=live_state.on_run_done)
        try:
            with Live(live_state, console=err, refresh_per_second=4, transient=True):
                eng.diagnose()
        except BadInput as e:
            _fail(str(e))
    if eng.errors:
        session.notes.append(f"diagnose failed on {len(eng.errors)} run(s) (a bug in diagnose): "
                             f"{eng.errors[0].strip().splitlines()[-1]}")
        err.print(f"internal error: diagnose failed on {len(eng.errors)} run(s); those runs are marked incomplete "
                  f"and were not used as evidence", highlight=False)
    save(session)
    if fix and session.fix:
        from diagnose.output import write_atomic
        write_atomic(fix, eng.sources[session.fix.run])
    _print(run_summary(session, str(outdir / "report.md")))
    if sig.code:
        err.print(f"interrupted: partial report written to {outdir}", highlight=False)
        raise typer.Exit(sig.code)
    raise typer.Exit(exit_code(session))


@app.command()
def check(
    submission: Path = typer.Argument(..., help="The submission .py file."),
    problem: Optional[Path] = typer.Option(None, "--problem", help="GPU MODE problem directory."),
    task: str = typer.Option("fp8-dual-gemm", "--task"),
    budget: Optional[float] = typer.Option(None, "--budget", help="Seconds per stage (default 180)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Also write session.json and report.md here."),
    small: Optional[bool] = typer.Option(None, "--small/--full-shapes"),
):
    """Pre-submit check: the static scan plus one cold predicted harness pass, no probes. Exit 0 safe,
    1 at risk or failing, 2 bad input."""
    from diagnose.engine import Engine, Options
    from diagnose.risks import static_risks
    from diagnose.runner.stages import StageRunner
    try:
        sub, gpu, settings = _prepare(submission, problem, task, budget, ",".join(harness.STAGES), False, None,
                                      False, 5, small)
    except BadInput as e:
        _fail(str(e))
    session = _new_session(sub, settings, gpu, ["diagnose"] + sys.argv[1:])
    risks = static_risks(session.scan)
    with _Signals() as sig:
        if not _cannot_judge(session, settings):
            runner = StageRunner(settings)
            eng = Engine(sub, session, settings.stages, Options(probes=[], jobs=1, gpu=gpu, bisect=False,
                                                                confirm=False, **_problem_options(settings)),
                         runner, stop=sig.stop)
            try:
                with err.status("cold harness pass…"):
                    eng.diagnose()
            except BadInput as e:
                _fail(str(e))
    if out_dir:
        _finish(session, out_dir)
    from diagnose.renderers.console import check_table
    lines, safe = check_table(session, risks, str(sub.path), gpu)
    _print(lines)
    if sig.code:
        raise typer.Exit(sig.code)
    if session.verdict.status.value == "needs_gpu":
        raise typer.Exit(3)
    raise typer.Exit(0 if safe else 1)


@app.command("probes")
def probes_cmd():
    """List the probe registry."""
    from diagnose.engine import probe_table
    t = Table(title="probes (run in this order)")
    for col in ("name", "suspect", "finds it by", "toggles"):
        t.add_column(col)
    for p in probe_table():
        t.add_row(p["name"], p["suspect"], p["finds"], p["toggles"])
    out.print(t)


@app.command()
def report(
    session_file: Path = typer.Argument(..., help="A session.json written by `diagnose run`."),
    fmt: str = typer.Option("md", "--format", help="md | json | trace"),
):
    """Re-render a saved session offline (no run)."""
    from diagnose.renderers import RENDERERS
    from diagnose.session import Session
    if fmt not in RENDERERS:
        _fail(f"--format must be one of {', '.join(RENDERERS)}, got {fmt!r}")
    try:
        session = Session.from_dict(json.loads(session_file.read_text(encoding="utf-8")))
    except FileNotFoundError:
        _fail(f"{session_file}: no such file")
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, IsADirectoryError) as e:
        _fail(f"{session_file}: not a readable diagnose session: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    sys.stdout.write(RENDERERS[fmt](session))


def main() -> None:
    app()
