"""What the terminal shows at the end of `run` and `check`. Everything the submission controls is escaped
for Rich, so a message like `[red]` or `[/x]` prints as itself."""
from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from diagnose.analysis import claims, summary
from diagnose.session import Session
from diagnose.status import Status


def _style(status: Status) -> str:
    return {Status.OK: "green", Status.NEEDS_GPU: "yellow", Status.INTERRUPTED: "yellow"}.get(status, "red")


def run_summary(session: Session, report_path: str, quiet: bool = False) -> list:
    """Renderables for the end of `diagnose run`: verdict first, then causes, cleared suspects, fix, each a
    claim of the session (claims.py)."""
    v, cl = session.verdict, claims.derive(session)
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
        out.append(f"  inconclusive: {escape(c.title)}: {escape(c.text)}")
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
    budget (on a GPU, or on this CPU), those within it only without spread and allowance, and per stage
    whether its margin is wide."""
    t = Table(title=f"diagnose check: {escape(session.submission.get('name', ''))}", show_lines=False)
    for col in ("stage", "status", "seconds", "budget", "share", "note"):
        t.add_column(col)
    over, cpu_over, tight, wide = [], [], [], []
    base = session.baseline
    for m, st in zip(summary.margins(base), [s for s in base.stages if s.status not in
                                             (Status.SKIPPED, Status.NEEDS_GPU, Status.INTERRUPTED)]) if base else []:
        sec = f"{m['seconds']:.1f}" + (" (pred.)" if m["predicted"] else "") + ("" if gpu else " (CPU)")
        if m["seconds"] > m["budget_s"]:
            (over if gpu else cpu_over).append(m["stage"])
        need = summary.margin_need(st, m["seconds"])
        if gpu and m["seconds"] <= m["budget_s"] < need:
            tight.append(f"{m['stage']} {need:.1f} s of {m['budget_s']:.0f}")
        wide.append(summary.wide(need, m["budget_s"]))
        share = f"{m['seconds'] / m['budget_s']:.0%}" if m["budget_s"] else "—"
        c = st.compile_step
        if c is not None:
            t.add_row(f"{st.name}: compile step", str(c.status), f"{c.charged_s:.1f}" + ("" if gpu else " (CPU)"),
                      f"{c.budget_s:.0f}", f"{c.charged_s / c.budget_s:.0%}" if c.budget_s else "—",
                      escape(("the harness ignores it: " + c.message if c.message else
                              "the harness ignores how it ends")[:80]))
        t.add_row(m["stage"], str(st.status), sec, f"{m['budget_s']:.0f}", share, escape(st.message[:80]))
    return t, over, cpu_over, tight, wide


def check_table(session: Session, risks: list[dict], sub_path: str, gpu: bool,
                quiet: bool = False) -> tuple[list, bool]:
    """The `check` table and whether the submission passes. Never passes when a stage failed, when a stage
    time measured or predicted on a GPU exceeds its budget, or when the scan found an error-level risk.
    Without a GPU, timings are shown but not judged (they say nothing about a GPU budget): a pass there is
    PASSED ON CPU, never SAFE."""
    t, over, cpu_over, tight, wide = _stage_table(session, gpu)
    lines: list = [t]
    for r in risks:
        color = "red" if r["severity"] == "error" else "yellow"
        lines.append(f"[{color}]risk[/] {escape(sub_path)}:{r['line']}: {escape(r['message'])}")
    status = session.verdict.status
    if status == Status.NEEDS_GPU:
        lines.append(f"[bold yellow]CANNOT JUDGE HERE[/] ({escape(session.verdict.message)})")
        return (lines[-1:] if quiet else lines), False
    if over:
        lines.append(f"note: {', '.join(over)} measured or predicted over budget")
    if cpu_over:
        lines.append(f"note: {', '.join(cpu_over)} over budget on this CPU; not judged")
    if not gpu:
        lines.append("note: no GPU here; CPU timings say nothing about a GPU budget")
    if tight:
        lines.append(f"note: with its measured spread and {summary.RUNNER_ALLOWANCE:.0%} for a slower or busier "
                     f"runner, {', '.join(tight)} s passes its budget")
    risky = any(r["severity"] == "error" for r in risks)
    passed = status == Status.OK and not over and not risky and not tight
    if passed and gpu and wide and all(wide):
        lines.append("note: every stage has a wide margin (under half of its budget with spread "
                     "and allowance): a timeout on KernelBot with this file points outside the submission (the "
                     "queue, or a runner's own limit)")
    label = ("SAFE" if gpu else "PASSED ON CPU") if passed else \
        "INCONCLUSIVE" if session.verdict.message.startswith("inconclusive:") else \
        "AT RISK (margin)" if tight and status == Status.OK and not over and not risky else "AT RISK"
    # the label always says which of its three reasons made it: a stage, a time, the source
    detail = (", over budget" if over and status == Status.OK else "") + \
        (", an error-level risk in the source" if risky and status == Status.OK else "") + \
        ("" if gpu or not passed else "; timing not judged without a GPU")
    why = f": {escape(session.verdict.message)}" if label == "INCONCLUSIVE" else ""
    lines.append(f"[bold {'green' if passed else 'red'}]{label}[/] ({status}{detail}){why}")
    return (lines[-1:] if quiet else lines), passed


def probes_markdown(rows: list[dict]) -> str:
    """The probe registry as the README's table: one row per probe, from each probe's own INFO."""
    cell = lambda text: text.replace("|", "\\|")   # noqa: E731 - a pipe inside a cell would end it
    lines = ["| probe | suspect | found by | toggles |", "|---|---|---|---|"]
    lines += [f"| `{r['name']}` | {cell(r['suspect'])} | {cell(r['finds'])} | {cell(r['toggles'])} |" for r in rows]
    return "\n".join(lines) + "\n"
