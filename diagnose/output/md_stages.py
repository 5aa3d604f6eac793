"""report.md's sections on the baseline's own stages: each stage's phases, timings and contention, the failure
with the submission's frames first, and the compile metrics of every run.
"""

from __future__ import annotations

from diagnose.analysis.verdict import summary
from diagnose.findings import clip
from diagnose.output import md_public, md_state
from diagnose.output.text import code_span, fence, fold_frames, tail
from diagnose.session import Session, StageResult
from diagnose.status import Status
from probes import door


def stage_table(st: StageResult, s: Session) -> list[str]:
    head = f"### {st.name}: {st.status}, {st.charged_s:.2f} s of {st.budget_s:.0f} s"
    if st.lost_worker:
        head += " (its pool worker died there; the harness waits out the budget)"
    if st.predicted_s is not None and st.timing:
        head += f", predicted {st.predicted_s:.1f} s"
        if st.predicted_range:
            head += f" (95 % range {st.predicted_range[0]:.1f}–{st.predicted_range[1]:.1f} s)"
    out = [head, ""]
    if st.message:
        out += [code_span(st.message), ""]
    out += md_state.compile_step(st, s)
    out += ["| phase | start s | end s | seconds |", "|---|---|---|---|"]
    for p in st.phases:
        held = f" (+{p.held_s:.2f} paused for another run's timing)" if p.held_s >= 0.01 else ""
        out.append(f"| {p.name}{' (open)' if p.open else ''} | {p.start_s:.3f} | {p.end_s:.3f} | "
                   f"{p.seconds:.3f}{held} |")
    fc = summary.first_call(st)
    if fc and not fc["open"]:
        out += ["", f"First call `{fc['phase']}` took {fc['total_s']:.2f} s: {fc['compile_s']:.2f} s compiling, "
                    f"{fc['rest_s']:.2f} s warming up and running, {fc['capture_s']:.2f} s capturing."]
    out.append("")
    for case, t in st.timing.items():
        p = t.get("predicted")
        med = sorted(t["per_call_s"])[len(t["per_call_s"]) // 2] * 1e6
        extra = (f"; the stopping rule predicts {p['repeats']} repeats, {p['seconds']:.1f} s ({p['reason']}, "
                 f"cv {p['cv'] * 100:.2f} %)") if p else ""
        out.append(f"- timing {case}: {len(t['per_call_s'])} repeats ({t['depth']}), median {med:.1f} µs{extra}")
    c = st.contention
    res = (f"Resources: wall {st.wall_s:.2f} s, of which {st.lock_wait_s:.2f} s queued for the GPU; CPU "
           f"{st.cpu_s:.2f} s (user {st.user_s:.2f} s); {c.run_delay_s:.2f} s waiting for a CPU; peak RSS "
           f"{st.peak_rss_mb:.0f} MB over {st.processes} process(es)")
    res += f", peak GPU {st.peak_gpu_mb:.0f} MB" if st.peak_gpu_mb else ""
    res += f"; exit code {st.exit_code}" if st.exit_code is not None else ""
    res += f"; signal {st.signal}" if st.signal else ""
    res += f"; killed ({st.killed})" if st.killed else ""
    out += ["", res + ".", ""]
    if st.anomalies:
        out += ["Anomalies on the tool's event channel (events the worker did not send, or malformed ones):", ""]
        out += [f"- {code_span(a)}" for a in st.anomalies] + [""]
    return out


def stages(s: Session) -> list[str]:
    base = s.baseline
    if not base:
        return []
    out = ["## Stages of the baseline run", ""]
    for st in base.stages:
        if st.status == Status.SKIPPED:
            out += [f"### {st.name}: skipped (an earlier stage failed)", ""]
        else:
            out += stage_table(st, s)
    return out


def failure(s: Session) -> list[str]:
    base = s.baseline
    st = base.failed_stage if base else None
    if not st:
        return []
    sub = s.submission.get("path", "submission.py")
    out = ["## Failure", ""]
    if st.exception:
        frames = st.exception.get("frames") or []
        out += [f"Exception in `{st.phase}`, the submission's frames first (library frames folded):", ""]
        out += fence("\n".join(fold_frames(frames, "submission.py", shown=sub)) + "\n" +
                     f"{st.exception.get('type')}: {clip((st.exception.get('message') or '').strip(), 2000)}")
        out += ["", "<details><summary>Full traceback</summary>", "", *fence(
            tail((st.exception.get("traceback") or "").rstrip(), 6000)), "", "</details>", ""]
    out += [line for lines in door.call("failure", step=st) for line in lines]   # a probe's own lines
    if st.stacks:
        site = s.verdict.site
        hl = f" Innermost submission frame: line {site['line']} {code_span(site['code'])}." if site else ""
        out += [f"Stacks when the process was stopped ({st.killed or st.signal or 'fatal signal'}).{hl}", "",
                *md_public.stacks(st.stacks, 6000), ""]
    if st.stderr_tail.strip():
        out += ["stderr (tail):", "", *fence(tail(st.stderr_tail.rstrip(), 3000)), ""]
    if len(out) == 2:        # a heading with nothing under it reads as a section lost
        out += [f"The failed stage (`{st.name}`) left no exception, stacks or stderr to show.", ""]
    return out


def compile_metrics(s: Session) -> list[str]:
    out = ["## Compile metrics", "", "| run | stage | compiles | recompiles | dynamo | aot | inductor | triton | "
           "autotune | cudagraphs | total |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = 0
    for r in s.runs:
        for st in r.stages:
            if not st.compile:
                continue
            c = summary.compile_split(st.compile)
            out.append(f"| {r.id} | {st.name} | {len(st.compile)} | {len(summary.recompiles(st))} | "
                       f"{c['dynamo']:.2f} | "
                       f"{c['aot_autograd']:.2f} | {c['inductor']:.2f} | {c['triton']:.2f} | {c['tuning']:.2f} | "
                       f"{c['cudagraphs']:.2f} | {c['total']:.2f} |")
            rows += 1
    if not rows:
        return ["## Compile metrics", "", "No torch.compile frame was compiled in any run.", ""]
    reasons = {str(x["reason"]).strip() for r in s.runs for st in r.stages for x in summary.recompiles(st)
               if x["reason"]}
    if reasons:
        # torch's text, cut silently: marking the cut (findings.clip) re-renders the committed recompile-storm
        # examples, whose reasons run past 200 characters; left for that decision
        out += ["", "Recompile reasons:", ""] + [f"- {code_span(x[:200])}" for x in sorted(reasons)[:10]]
    return out + ["", "Seconds; each layer excludes the layers inside it.", ""]

