"""report.md: ready to paste into a ticket.

Order: verdict, ranked causes, suspects verified not to matter, the fix and the cost of each working fix,
per-probe evidence, a gantt of baseline against the fix, the baseline's stages (phase table), the stack
or exception, compile metrics, environment, and the commands to reproduce.
"""
from __future__ import annotations

from diagnose import summary
from diagnose.session import Run, Session, StageResult


def _s(x, unit="s", nd=2) -> str:
    return "—" if x is None else f"{x:.{nd}f} {unit}".strip()


def _name(run: Run) -> str:
    return "baseline (as submitted)" if run.probe is None else f"{run.probe}: {run.toggle}"


def _verdict(s: Session) -> list[str]:
    v = s.verdict
    base = s.baseline
    out = ["## Verdict", ""]
    status = v.get("status", "incomplete").upper()
    if not s.complete:
        out += ["> **Incomplete diagnosis**: it was interrupted or failed part-way; what is below is what "
                "finished.", ""]
    if v.get("status") == "ok":
        marg = "; ".join(f"{m['stage']} {m['seconds']:.1f} s of {m['budget_s']:.0f} s"
                         for m in summary.margins(base)) if base else ""
        out.append(f"**OK.** Every stage passed its checks within its budget ({marg}). No cause to report.")
    else:
        where = f" in stage `{v.get('stage')}`, phase `{v.get('phase')}`" if v.get("stage") else ""
        site = v.get("site")
        line = f" at `{site['file']}:{site['line']}` (`{site['code']}`)" if site else ""
        out.append(f"**{status}**{where}{line}: {v.get('message', '')}.")
        if s.causes:
            top = s.causes[0]
            out.append(f" Top cause: {top['narrative']}")
        if s.fix:
            out.append(f" Verified fix: `{s.fix['toggle']}` passes every stage "
                       f"({_s(s.fix['steady_us'], 'µs', 1)} per call, geometric mean).")
    if s.harness.get("cpu_only"):
        out += ["", "_No GPU: the run used the CPU and the small shape set. CPU timings of the benchmark stages "
                "say nothing about a GPU budget; no verdict rests on them._"]
    return out + [""]


def _causes(s: Session) -> list[str]:
    out = ["## Ranked causes", ""]
    if not s.causes:
        return out + ["None: " + ("the submission is healthy." if s.verdict.get("status") == "ok" else
                                  "no probe ran far enough to tell.") , ""]
    for c in s.causes:
        site = c.get("site")
        where = f" — `{site['file']}:{site['line']}` `{site['code']}`" if site else ""
        out.append(f"{c['rank']}. **{' × '.join(c['suspects']) or 'unknown'}**{where} "
                   f"(confidence {c['confidence']}; {'changes the outcome' if c['changes_outcome'] else 'time only'})")
        out.append(f"   {c['narrative']}")
        saved = [f"{k} {v['saved_s']:+.1f} s of {v['budget_s']:.0f} s (noise ±{v['noise_s']:.1f})"
                 for k, v in c.get("seconds_saved", {}).items()]
        if saved:
            out.append(f"   Seconds saved per stage: {'; '.join(saved)}.")
        out.append(f"   Evidence: runs {', '.join(c['evidence'])}.")
    out.append("")
    if s.cleared:
        out += ["**Verified not to be the cause:**", ""]
        out += [f"- `{c['probe']}` — {c['narrative']}" for c in s.cleared]
        out.append("")
    return out


def _fix(s: Session) -> list[str]:
    if not s.fix:
        return []
    f = s.fix
    out = ["## Verified fix", "", f"`{f['toggle']}` (run {f['run']}) passes every check and fits every budget, "
           f"with the best steady state of the working variants.", "", "```diff", f["diff"].rstrip(), "```", "",
           "Steady-state cost of every working fix (geometric mean of the benchmark shapes' median per-call time):",
           "", "| fix | steady µs | vs best |", "|---|---|---|"]
    for c in f["costs"]:
        vs = "—" if c["delta_us"] is None else "best" if c["delta_us"] == 0 else f"+{c['delta_us']:.1f} µs per call"
        out.append(f"| {c['probe']}: {c['toggle']} | {_s(c['steady_us'], '', 1)} | {vs} |")
    return out + [""]


def _evidence(s: Session) -> list[str]:
    out = ["## Evidence per probe", "", "| run | toggle | outcome | import | compile | first call (compile / "
           "capture / rest) | recompiles | steady µs | worst stage vs budget |", "|---|---|---|---|---|---|---|---|---|"]
    for r in s.runs:
        row = summary.run_row(r)
        fc = row["first_call"]
        fcs = "—" if not fc else (f"{fc['total_s']:.2f} s ({fc['compile_s']:.2f} / {fc['capture_s']:.2f} / "
                                  f"{fc['rest_s']:.2f}){' †' if fc['open'] else ''}")
        w = row["worst_stage"]
        ws = f"{w[2]} {w[0]:.1f} / {w[1]:.0f} s" if w else "—"
        note = f" ({r.note})" if r.note else ""
        out.append(f"| {r.id} | {_name(r)}{note} | **{r.outcome}** | {_s(row['import_s'])} | "
                   f"{_s(row['compile_s'])} | {fcs} | {row['recompiles']} | {_s(row['steady_us'], '', 1)} | {ws} |")
    out += ["", "† the phase was still open when the process died or was stopped.", ""]
    if s.probes:
        out += ["Probes:", ""] + [f"- `{p['name']}`: {p['state']} — {p['why']}" for p in s.probes] + [""]
    w = summary.warmup_per_iteration(s)
    if w:
        pts = ", ".join(f"N={n}: {t:.2f} s" for n, t in w["points"])
        if w["measurable"]:
            out += [f"Warmup costs about {w['seconds_per_iteration']:.3f} s per iteration (first call, {pts}).", ""]
        else:
            out += [f"Warmup has no measurable cost per iteration: the first calls differ by less than the noise "
                    f"({pts}).", ""]
    return out


def _gantt(s: Session) -> list[str]:
    base = s.baseline
    fix = next((r for r in s.runs if s.fix and r.id == s.fix["run"]), None)
    if base is None:
        return []
    out = ["## Timeline", "", "```mermaid", "gantt", "    dateFormat X", "    axisFormat %s s"]
    for run in [base] + ([fix] if fix else []):
        for st in run.stages:
            if st.status == "skipped":
                continue
            out.append(f"    section {'baseline' if run is base else 'fix'} {st.name}")
            for p in st.phases:
                if p.end_s - p.start_s < 0.05 and not p.open:
                    continue
                tag = "crit, " if p.open or not p.ok else ""
                out.append(f"    {p.name.replace(':', ' ')} :{tag}{int(p.start_s * 1000)}, "
                           f"{max(int(p.end_s * 1000), int(p.start_s * 1000) + 1)}")
    out += ["```", "", "_Axis in milliseconds of each stage's own clock._", ""]
    return out


def _stage_table(st: StageResult) -> list[str]:
    out = [f"### {st.name}: {st.status} — {st.wall_s:.2f} s of {st.budget_s:.0f} s"
           + (f", predicted {st.predicted_s:.1f} s" if st.predicted_s is not None and st.timing else ""), ""]
    if st.message:
        out += [f"{st.message}", ""]
    out += ["| phase | start s | end s | seconds |", "|---|---|---|---|"]
    for p in st.phases:
        out.append(f"| {p.name}{' (open)' if p.open else ''} | {p.start_s:.3f} | {p.end_s:.3f} | "
                   f"{p.end_s - p.start_s:.3f} |")
    fc = summary.first_call(st)
    if fc:
        out += ["", f"First call `{fc['phase']}` took {fc['total_s']:.2f} s: {fc['compile_s']:.2f} s compiling, "
                    f"{fc['rest_s']:.2f} s warming up and running, {fc['capture_s']:.2f} s capturing."]
    for case, t in st.timing.items():
        p = t.get("predicted")
        med = sorted(t["per_call_s"])[len(t["per_call_s"]) // 2] * 1e6
        extra = (f"; the stopping rule predicts {p['repeats']} repeats, {p['seconds']:.1f} s ({p['reason']}, "
                 f"cv {p['cv'] * 100:.2f} %)") if p else ""
        out.append(f"- timing {case}: {len(t['per_call_s'])} repeats ({t['depth']}), median {med:.1f} µs{extra}")
    out += ["", f"Resources: wall {st.wall_s:.2f} s, CPU {st.cpu_s:.2f} s (user {st.user_s:.2f} s), peak RSS "
                f"{st.peak_rss_mb:.0f} MB over {st.processes} process(es)"
            + (f", peak GPU {st.peak_gpu_mb:.0f} MB" if st.peak_gpu_mb else "")
            + (f", exit code {st.exit_code}" if st.exit_code is not None else "")
            + (f", signal {st.signal}" if st.signal else "") + (f", killed ({st.killed})" if st.killed else "")
            + (f", timing lock wait {st.lock_wait_s:.2f} s" if st.lock_wait_s else "") + ".", ""]
    return out


def _stages(s: Session) -> list[str]:
    base = s.baseline
    if not base:
        return []
    out = ["## Stages of the baseline run", ""]
    for st in base.stages:
        if st.status == "skipped":
            out += [f"### {st.name}: skipped (an earlier stage failed)", ""]
        else:
            out += _stage_table(st)
    return out


def _failure(s: Session) -> list[str]:
    base = s.baseline
    st = base.failed_stage if base else None
    if not st:
        return []
    out = ["## Failure", ""]
    if st.exception:
        out += [f"Exception in `{st.phase}`:", "", "```", st.exception.get("traceback", "").rstrip()[-6000:], "```", ""]
    if st.stacks:
        site = s.verdict.get("site")
        hl = f"Innermost submission frame: line {site['line']} `{site['code']}`." if site else ""
        out += [f"Stacks when the process was stopped ({st.killed or st.signal or 'fatal signal'}). {hl}", "",
                "```", st.stacks.rstrip()[-6000:], "```", ""]
    if st.stderr_tail.strip():
        out += ["stderr (tail):", "", "```", st.stderr_tail.rstrip()[-3000:], "```", ""]
    return out


def _compile(s: Session) -> list[str]:
    out = ["## Compile metrics", "", "| run | stage | compiles | recompiles | dynamo | aot | inductor | triton | "
           "autotune | cudagraphs | total |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = 0
    for r in s.runs:
        for st in r.stages:
            if not st.compile:
                continue
            c = summary.compile_split(st.compile)
            out.append(f"| {r.id} | {st.name} | {len(st.compile)} | {len(summary.recompiles(st))} | {c['dynamo']:.2f} | "
                       f"{c['aot_autograd']:.2f} | {c['inductor']:.2f} | {c['triton']:.2f} | {c['autotune']:.2f} | "
                       f"{c['cudagraphs']:.2f} | {c['total']:.2f} |")
            rows += 1
    if not rows:
        return ["## Compile metrics", "", "No torch.compile frame was compiled in any run.", ""]
    reasons = {str(x["reason"]).strip() for r in s.runs for st in r.stages for x in summary.recompiles(st) if x["reason"]}
    if reasons:
        out += ["", "Recompile reasons:", ""] + [f"- `{x[:200]}`" for x in sorted(reasons)]
    return out + ["", "Seconds; each layer excludes the layers inside it.", ""]


def _environment(s: Session) -> list[str]:
    e = s.environment
    h = s.harness
    keys = [("GPU", e.get("gpu")), ("driver", e.get("driver")), ("CUDA", e.get("cuda")), ("torch", e.get("torch")),
            ("triton", e.get("triton")), ("python", e.get("python")), ("CPUs", e.get("cpu_count")),
            ("task", f"{s.task.get('name')} ({s.task.get('shape_set')} shapes)"),
            ("harness", f"{h.get('name')}, depth {h.get('depth')}, stages {', '.join(h.get('stages', []))}"),
            ("budgets", ", ".join(f"{k} {v:g} s" for k, v in h.get("budgets", {}).items())),
            ("compile caches", "cold at the start of every run (fresh empty directories), shared by that run's "
                               "stages; the `cache` probe reuses the baseline's"),
            ("L2 flush", h.get("flush", "—")),
            ("concurrency", f"{h.get('concurrency', '—')}; at most {summary.overlap(s)} overlapped (phase times are "
                            f"as each child saw them; no two timing loops overlapped)")]
    return ["## Environment", "", "| | |", "|---|---|"] + [f"| {k} | {v if v is not None else '—'} |"
                                                          for k, v in keys] + [""]


def render(session: Session) -> str:
    s = session
    title = f"# diagnose: {s.submission.get('name', 'submission')}"
    lines = [title, "", f"_{s.created} · diagnose {s.tool_version} · session schema {s.schema_version}_", ""]
    if s.scan:
        found = ["## Suspects found in the source", ""] + [
            f"- `{x['suspect']}` L{x['line']}: `{x['code']}`" for x in s.scan] + [""]
    else:
        found = ["## Suspects found in the source", "", "None.", ""]
    for part in (_verdict, _causes, _fix, _evidence, _gantt):
        lines += part(s)
    lines += found
    for part in (_stages, _failure, _compile, _environment):
        lines += part(s)
    lines += ["## Reproduce", "", "```", " ".join(s.command), "```", ""]
    for n in s.notes:
        lines.append(f"- {n}")
    return "\n".join(lines).rstrip() + "\n"
