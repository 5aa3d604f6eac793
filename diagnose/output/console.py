"""What the terminal shows at the end of `run` and `check`. Everything the submission controls is escaped
for Rich, so a message like `[red]` or `[/x]` prints as itself."""
from __future__ import annotations

import enum

from rich.markup import escape
from rich.table import Table

from diagnose.analysis.audit import claims
from diagnose.analysis.verdict import evidence, summary
from diagnose.findings import clip
from diagnose.session import Session
from diagnose.status import FAILURES, Status


def _style(status: Status) -> str:
    return {Status.OK: "green", Status.NEEDS_GPU: "yellow", Status.INTERRUPTED: "yellow"}.get(status, "red")


def run_summary(session: Session, report_path: str, quiet: bool = False, cl: list | None = None) -> list:
    """Renderables for the end of `diagnose run`: verdict first, then causes, cleared suspects, fix, each a
    claim of the session (claims.py; `cl`, as the engine settled them, else derived again)."""
    v, cl = session.verdict, claims.derive(session) if cl is None else cl
    said = claims.one(cl, "verdict")
    head = f"[bold {_style(v.status)}]{said.title}[/]" + (f" ({said.detail})" if said.detail else "")
    out = [f"{head} {escape(said.text)}"]
    if quiet:
        return out
    if v.site:
        out.append(f"  at {escape(v.site['file'])}:{v.site['line']}  {escape(v.site['code'])}")
    if v.note:
        out.append(f"  {escape(v.note)}")
    for i, c in enumerate(claims.by_kind(cl, "cause")[:3], 1):
        out.append(f"  {i}. [bold]{escape(c.title)}[/] ({escape(c.detail.split(';')[0])}): {escape(c.text)}")
    for c in claims.by_kind(cl, "cleared"):
        out.append(f"  not the cause: {escape(c.title)}" + (f" ({c.detail})" if c.detail else ""))
    for c in claims.by_kind(cl, "inconclusive"):
        out.append(f"  {escape(c.text)}" if c.key == claims.NOT_LOOKED_KEY else
                   f"  inconclusive: {escape(c.title)}: {escape(c.text)}")
    fix = claims.one(cl, "fix")
    if fix:
        us = session.fix.steady_us
        out.append(f"  fix: {escape(fix.title)}" + (f" ({us:.1f} µs per call)" if us else ""))
    for w in session.warnings:
        out.append(f"  [yellow]warning[/]: {escape(w['message'])}")
    out.append(f"  report: {escape(report_path)}")
    return out


def probes_table(rows: list[dict]) -> Table:
    t = Table(title="probes (run in this order)")
    for col in ("name", "suspect", "finds it by", "toggles"):
        t.add_column(col)
    for p in rows:
        t.add_row(escape(p["name"]), escape(p["suspect"]), escape(p["finds"]), escape(p["toggles"]))
    return t


def _stage_table(session: Session, gpu: bool):
    """check's table, a row per step (each stage's compile step too), and what the margins say: the stages over
    budget on a GPU (a CPU's times are shown, not judged), those within it only without spread and allowance, per
    stage whether its margin is wide, and the passes whose judgment waits for a measure alone on their GPU
    (evidence.alone)."""
    t = Table(title=f"diagnose check: {escape(session.submission.get('name', ''))}", show_lines=False)
    for col in ("stage", "status", "seconds", "budget", "share", "note"):
        t.add_column(col)
    over, tight, wide, waiting = [], [], [], []
    base = session.baseline
    shown = [s for s in base.stages if s.status not in (Status.SKIPPED, Status.NEEDS_GPU, Status.INTERRUPTED)] \
        if base else []
    for m, st in zip(summary.margins(base), shown, strict=False) if base else []:
        sec = f"{m['seconds']:.1f}" + (" (pred.)" if m["predicted"] else "") + ("" if gpu else " (CPU)")
        passed = st.status in (Status.OK, Status.AT_RISK)
        # a pass's time is judged from the stage measured alone on its GPU: the baseline's, else its solo rerun's
        got = evidence.alone(session, base, st.name) if gpu and passed else None
        judged = got[1] if got else st
        seconds = judged.seconds if got else m["seconds"]
        need = summary.margin_need(judged, seconds)
        # a margin is a pass's: a stage that failed has none to be thin; a CPU's time is shown, never judged
        risky = gpu and (seconds > m["budget_s"] or (passed and seconds <= m["budget_s"] < need))
        if passed and got is None and risky:
            waiting.append(evidence.waits(st, "whether its time fits its budget"))
        elif risky and seconds > m["budget_s"]:
            over.append(m["stage"])
        elif risky:
            tight.append(f"{m['stage']} would need {need:.1f} s of its {m['budget_s']:.0f}")
        wide.append(summary.wide(need, m["budget_s"]))
        share = f"{m['seconds'] / m['budget_s']:.0%}" if m["budget_s"] else "—"
        c = st.compile_step
        if c is not None:
            t.add_row(f"{st.name}: compile step", str(c.status), f"{c.charged_s:.1f}" + ("" if gpu else " (CPU)"),
                      f"{c.budget_s:.0f}", f"{c.charged_s / c.budget_s:.0%}" if c.budget_s else "—",
                      escape(clip("the harness ignores it: " + c.message if c.message else
                                  "the harness ignores how it ends", 80)))
        t.add_row(m["stage"], str(st.status), sec, f"{m['budget_s']:.0f}", share, escape(clip(st.message, 80)))
    return t, over, tight, wide, waiting


class Word(str, enum.Enum):
    """The one word `check` ends in; each has its own exit code (cli/exits.py)."""
    SAFE = "SAFE"
    PASSED_ON_CPU = "PASSED ON CPU"     # every check passed; without a GPU, timing is not judged
    AT_RISK = "AT RISK"                 # a pass whose margin or prediction is thin, or a risky source
    FAILS = "FAILS"                     # what KernelBot will report: a crash, wrong result, timeout, tampering
    INCONCLUSIVE = "INCONCLUSIVE"
    INTERRUPTED = "INTERRUPTED"
    CANNOT_JUDGE = "CANNOT JUDGE HERE"

    def __str__(self) -> str:
        return self.value


UNFINISHED = (Status.SKIPPED, Status.NEEDS_GPU, Status.INTERRUPTED, Status.INCOMPLETE)


def stage_progress(session: Session) -> tuple[list[str], list[str]]:
    """The submission's planned stages that finished (with how) and those that never did (and why not). A stage
    the harness skips after a failure was never due, so it is neither."""
    base = session.baseline
    have = {st.name: st for st in (base.stages if base else [])}
    failed = base is not None and base.failed_stage is not None and base.failed_stage.status in FAILURES
    done, never = [], []
    for name in session.harness.get("stages") or []:
        st = have.get(name)
        if st is not None and st.status not in UNFINISHED:
            done.append(f"{name} {st.status}")
        elif not (failed and (st is None or st.status == Status.SKIPPED)):
            stopped = st is not None and st.status == Status.INTERRUPTED
            never.append(f"{name} ({'stopped' if stopped else 'never started'})")
    return done, never


def progress_text(session: Session) -> str:
    done, never = stage_progress(session)
    return f"finished: {', '.join(done) or 'no stage'}; never finished: {', '.join(never) or 'none'}"


def check_header(name: str, board: dict | None, folder: str, budgets: dict) -> str:
    """check's first line: what it resolved (the leaderboard, the folder) and the budgets it judges against."""
    where = (f"leaderboard {board['name']} ({board['listed_in']}) · folder {folder}" if board else
             f"folder {folder}")
    stages = ", ".join(f"{s} {budgets[s]:g} s" for s in ("test", "benchmark", "leaderboard") if s in budgets)
    return escape(f"check: {name} · {where} · budgets: {stages}; compile step {budgets['compile']:g} s")


def _inconclusive(session: Session, errors: list[str]) -> str | None:
    """Why a run that ended for another reason than its own result cannot be judged, or None."""
    v = session.verdict
    if v.status in FAILURES or v.status == Status.NEEDS_GPU:
        return None
    if errors:
        return (f"diagnose failed on {len(errors)} run(s) (a bug in diagnose): "
                f"{errors[0].strip().splitlines()[-1]}")
    if v.status in (Status.INCOMPLETE, Status.INTERRUPTED):
        return v.message.removeprefix("inconclusive: ") or "no run finished"
    base = session.baseline
    cut = [st.name for st in (base.stages if base else []) if st.status in (Status.INTERRUPTED, Status.INCOMPLETE)]
    if cut:
        return f"{', '.join(cut)} ended for another reason than the submission's result"
    return None if session.complete else "the diagnosis ended before it was complete"


def _judged(session: Session, risky: bool, over: list, tight: list, gpu: bool, waiting=()) -> tuple[Word, str]:
    """The word for a run that ended on its own result, and the reason beside it."""
    status = session.verdict.status
    base = session.baseline
    ended = base.failed_stage if base is not None else None
    if status == Status.TIMEOUT and not gpu and not (ended is not None and ended.lost_worker):
        # no time decides anything on a CPU: a stage its cap stopped never reached the end of its checks
        cap = session.harness.get("cpu_cap_s")
        return Word.INCONCLUSIVE, (f"({status}): {ended.name if ended else 'a stage'} did not finish "
                                   + (f"within this CPU's {cap:g} s cap" if cap else "on this CPU") +
                                   "; on a CPU time decides nothing: check it where the problem's GPU is")
    if status in FAILURES:
        return Word.FAILS, f"({status})"
    if waiting and status == Status.OK and not over and not risky and not tight:
        return Word.INCONCLUSIVE, f"({status}): {'; '.join(waiting)}"
    if status == Status.OK and not over and not risky and not tight:
        return (Word.SAFE, "(ok)") if gpu else (Word.PASSED_ON_CPU, "(ok; timing not judged without a GPU)")
    if tight and status == Status.OK and not over and not risky:
        return Word.AT_RISK, f"(margin) ({status})"
    # the reason always says which made it: a predicted stage, a time, the source
    detail = (", over budget" if over and status == Status.OK else "") + \
        (", an error-level risk in the source" if risky and status == Status.OK else "")
    return Word.AT_RISK, f"({status}{detail})"


def check_lines(session: Session, risks: list[dict], sub_path: str, gpu: bool, quiet: bool = False,
                stopped: str | None = None, errors: list[str] = (), cl: list | None = None) -> tuple[list, Word]:
    """The `check` table and its one word. Only a run that ended on its own result is judged: one a signal
    (`stopped`: its name) ended is INTERRUPTED, one a bug of ours or anything else cut short is INCONCLUSIVE;
    either lists the stages that finished and those that never did. A failed stage FAILS. A pass is AT RISK
    when a stage time measured or predicted on a GPU exceeds its budget or is too close to it, or when the
    scan found an error-level risk. Without a GPU, timings are shown but not judged: a pass there is PASSED
    ON CPU, never SAFE."""
    t, over, tight, wide, waiting = _stage_table(session, gpu)
    lines: list = [t] if t.row_count else []      # no runs (it cannot be judged here): no empty table
    for r in risks:
        color = "red" if r["severity"] == "error" else "yellow"
        lines.append(f"[{color}]risk[/] {escape(sub_path)}:{r['line']}: {escape(r['message'])}")
    status = session.verdict.status
    why = None if stopped else _inconclusive(session, list(errors))
    if stopped:
        word, label = Word.INTERRUPTED, f"(by {stopped}): {progress_text(session)}"
    elif status == Status.NEEDS_GPU:
        word, label = Word.CANNOT_JUDGE, f"({session.verdict.message})"
    elif why:
        word, label = Word.INCONCLUSIVE, f"({status}): {why}" + (f" ({progress_text(session)})"
                                                                  if stage_progress(session)[1] else "")
    else:
        word, label = _judged(session, any(r["severity"] == "error" for r in risks), over, tight, gpu, waiting)
        lines += _notes(word, over, tight, wide, gpu, session.harness.get("cpu_cap_s")) + \
            _top_statement(session, word, cl)
    color = {Word.SAFE: "green", Word.PASSED_ON_CPU: "green", Word.AT_RISK: "red", Word.FAILS: "red"}
    lines.append(f"[bold {color.get(word, 'yellow')}]{word}[/] {escape(label)}")
    return (lines[-1:] if quiet else lines), word


def _top_statement(session: Session, word: Word, cl: list | None = None) -> list[str]:
    """A failure's top statement, as the report gives it: for a check (no probe ran), the failure, where it
    happened and that its cause was not looked for, with the `diagnose run` command that would look."""
    if word != Word.FAILS:
        return []
    cl = claims.derive(session) if cl is None else cl     # the engine's settled claims where the CLI has them
    top = next(iter(claims.by_kind(cl, "cause")), None) or claims.one(cl, claims.NOT_LOOKED_KEY)
    return [escape(top.text if top.text.endswith(".") else top.text + ".")] if top else []


def _notes(word: Word, over: list, tight: list, wide: list, gpu: bool, cap: float | None) -> list[str]:
    """What the margins say, for a run judged on its own result (never for one cut short)."""
    out = []
    if over:
        out.append(f"note: {', '.join(over)} measured or predicted over budget")
    if not gpu:
        out.append("note: no GPU here; " + (f"each stage ran to its checks, up to {cap:g} s instead of its budget; "
                                            if cap else "") + "CPU timings say nothing about a GPU budget")
    if tight:
        out.append(f"note: with its measured spread and {summary.RUNNER_ALLOWANCE:.0%} for a slower or busier "
                   f"runner, {', '.join(tight)} s")
    if word == Word.SAFE and wide and all(wide):
        out.append("note: every stage has a wide margin (under half of its budget with spread and allowance): a "
                   "timeout on KernelBot with this file points outside the submission (the queue, or a runner's "
                   "own limit)")
    return out


def check_table(session: Session, risks: list[dict], sub_path: str, gpu: bool,
                quiet: bool = False) -> tuple[list, bool]:
    """check's lines and whether it passes (SAFE, or PASSED ON CPU)."""
    lines, word = check_lines(session, risks, sub_path, gpu, quiet=quiet)
    return lines, word in (Word.SAFE, Word.PASSED_ON_CPU)


def probes_markdown(rows: list[dict]) -> str:
    """The probe registry as the README's table: one row per probe, from each probe's own INFO."""
    cell = lambda text: text.replace("|", "\\|")   # noqa: E731 - a pipe inside a cell would end it
    lines = ["| probe | suspect | found by | toggles |", "|---|---|---|---|"]
    lines += [f"| `{r['name']}` | {cell(r['suspect'])} | {cell(r['finds'])} | {cell(r['toggles'])} |" for r in rows]
    return "\n".join(lines) + "\n"
