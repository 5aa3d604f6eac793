"""report.md: ready to paste into a ticket.

The first five lines carry the verdict, the top cause and the fix. Then, in ticket order: the verdict's
details and warnings, ranked causes, suspects verified not to matter, suspects the runs cannot speak
for, the fix and the cost of every working fix, evidence per run, a timeline of the baseline against the
fix, the suspects in the source, the baseline's stages, the failure (the submission's frames first),
compile metrics, the environment, and the command to reproduce. Every statement is its own paragraph.
Text the submission controls (messages, code, paths) goes into code spans or fenced blocks. So that it
pastes whole into a GitHub issue, the first screen is the verdict, the causes, the fix and its diff; the
long evidence is folded under its heading, and no path of this machine is in it (md_public.py).
"""
from __future__ import annotations

import shlex

from diagnose.analysis.audit import claims
from diagnose.analysis.audit.claims import Claim
from diagnose.analysis.verdict import hotspots, summary, target
from diagnose.output import md_bisect, md_libs, md_public, md_stages, md_state
from diagnose.output.text import code_span, fence
from diagnose.session import Role, Run, Session
from diagnose.status import NOT_LOOKED, UNEXPLAINED, Status


def _s(x, unit="s", nd=2) -> str:
    return "n/a" if x is None else f"{x:.{nd}f} {unit}".strip()


def _name(run: Run) -> str:
    if run.role == Role.BASELINE:
        return "baseline (as submitted)"
    if run.role == Role.CONFIRM:
        return f"solo rerun of {run.confirms}"
    if run.role == Role.TUNING:
        return "tuning run"
    return f"{run.probe or 'all'}: {run.toggle}"


def _at(site: dict | None) -> str:
    if not site:
        return ""
    where = code_span(f"{site['file']}:{site['line']}")
    return f" at {where} {code_span(site['code'])}" if site.get("code") else f" at {where}"


def _head(s: Session, cl: list[Claim]) -> list[str]:
    v, said = s.verdict, claims.one(cl, "verdict")
    status = said.title
    name = s.submission.get("name", "submission")
    out = [f"# diagnose: {name}: {status}", ""]
    where = f" in `{v.stage}`" + (f", phase `{v.phase}`" if v.phase else "") if v.stage else ""
    # a failure's message may hold what the submission printed; the OK sentence is ours
    msg = "" if not said.text else f": {said.text}" if v.status == Status.OK else f": {code_span(said.text)}"
    unconf = f" ({said.detail})" if said.detail else ""
    out.append(f"- **Verdict:** {status}{unconf}{where}{_at(v.site)}{msg}.")
    causes = claims.by_kind(cl, "cause")
    if s.edit_bisect:      # `diagnose bisect`: the minimal edits, and what their own diagnosis found
        b, d = s.edit_bisect, s.edit_bisect.get("diagnosis") or {}
        out.append(f"- **Minimal edits:** {', '.join(b['minimal']) or 'none verified'} ({b['runs']} runs of "
                   f"{b['exhaustive']} subsets).")
        if d:
            out.append(f"- **Their diagnosis** (`{d['report']}`): {d['verdict'].upper()}; top cause "
                       f"{d['top_cause'] or 'none'}; fix {code_span(d['fix']) if d['fix'] else 'none'}.")
        return out + [""]
    if causes:
        top = causes[0]
        out.append(f"- **Top cause:** {top.title} ({top.detail.split(';')[0]}). {top.text}")
    else:
        out.append("- **Top cause:** " + _no_cause(s))
    fix = claims.one(cl, "fix")
    if fix:
        us = f", {s.fix.steady_us:.1f} µs per call (geometric mean of the benchmark shapes)" if s.fix.steady_us else ""
        ran = s.harness.get("stages") or []
        which = "every stage" if set(ran) >= {"test", "benchmark", "leaderboard"} or not ran else \
            f"every stage run ({', '.join(ran)})"
        out.append(f"- **Verified fix:** {code_span(fix.title)} passes {which}{us}. Diff below.")
    elif claims.one(cl, claims.NOT_LOOKED_KEY):     # no probe ran: no variant was tried
        out.append("- **Verified fix:** none: no probe ran, so no variant was tried.")
    else:
        out.append("- **Verified fix:** none" + (
            "." if v.status == Status.OK else ": no variant passed every stage the baseline ran clear of its budget."))
    return out + [""]


def _no_cause(s: Session) -> str:
    st = s.verdict.status
    if st == Status.OK:
        return "none: the submission is healthy."
    if st == Status.NEEDS_GPU:
        return "none: this machine cannot judge the submission."
    if st in (Status.INTERRUPTED, Status.INCOMPLETE):
        return "none: the diagnosis stopped before any probe could tell."
    if not s.complete and s.cause_at_s is None and s.diagnosis_s is None:
        return "pending: the probes had not decided when this report was written."
    own = next((i for i in s.inconclusive if i.probe == UNEXPLAINED), None)
    if own:
        return f"inconclusive: {own.reason}."
    unsought = next((i for i in s.inconclusive if i.probe == NOT_LOOKED), None)
    if unsought:        # a session that ran no probe (check): the failure, and that its cause was not looked for
        return f"not looked for. {unsought.reason}."
    return "none: no probe ran far enough to tell, and no hot spot was measured."


def _verdict(s: Session, cl: list[Claim]) -> list[str]:
    v, said = s.verdict, claims.one(cl, "verdict")
    out = ["## Verdict", ""]
    if not s.complete:
        out += ["**Incomplete diagnosis.** It was interrupted or failed part-way; what follows is what finished.", ""]
    if v.status == Status.OK:
        out += [f"{said.text[0].upper()}{said.text[1:]}.", ""]
    elif said.text:
        out += [f"{said.title}: {code_span(said.text)}", ""]
    if v.note:
        out += [f"{v.note[0].upper()}{v.note[1:]}.", ""]
    out += [f"_Runs: {', '.join(said.runs) or 'none'}._", ""]
    for w in s.warnings:
        out += [f"**Warning ({w['kind']}):** {w['message']}", ""]
    if s.harness.get("cpu_only"):
        out += ["_No GPU: the run used the CPU and the small shape set. CPU timings of the benchmark stages say "
                "nothing about a GPU budget, and no verdict rests on them._", ""]
    aim = target.paragraph(s)
    if aim:
        out += [f"**Target GPU.** {aim}", ""]
    return out


def _causes(s: Session, cl: list[Claim]) -> list[str]:
    out = ["## Ranked causes", ""]
    if not s.causes:
        out += [_no_cause(s)[0].upper() + _no_cause(s)[1:], ""]
    for c, said in zip(s.causes, claims.by_kind(cl, "cause"), strict=True):
        out += [f"{c.rank}. **{said.title}**{_at(c.site)} ({said.detail})", "", f"   {said.text}", ""]
        saved = [f"{k} {v['saved_s']:+.1f} s of {v['budget_s']:.0f} s (noise ±{v['noise_s']:.1f})"
                 for k, v in c.seconds_saved.items() if v["claimed"]]
        if saved:
            out += [f"   Seconds saved per stage: {'; '.join(saved)}.", ""]
        if c.alternatives:
            out += [f"   Other single toggles that also fix it: {', '.join(c.alternatives)}.", ""]
        if c.state:
            out += [f"   State kept between processes differs between these runs: {c.state}.", ""]
        out += [f"   Evidence: runs {', '.join(said.runs)}.", ""]
    cleared = claims.by_kind(cl, "cleared")
    if cleared:
        out += ["### Verified not to be the cause", ""]
        out += [f"- `{c.title}`: {c.text}" + (f" ({c.detail})" if c.detail else "") + f" Runs {', '.join(c.runs)}."
                for c in cleared] + [""]
    unsure = [c for c in claims.by_kind(cl, "inconclusive") if c.key != claims.NOT_LOOKED_KEY]   # said above
    if unsure:
        out += ["### Inconclusive", ""]
        out += [f"- `{i.title}`: {i.text}. Runs {', '.join(i.runs)}." for i in unsure] + [""]
    return out


def _where(s: Session) -> list[str]:
    """Per failing or slow phase of the baseline: the hottest submission lines, from the sampler."""
    base = s.baseline
    todo = hotspots.phases_to_explain(base) if base else []
    if not todo:
        return []
    out = ["## Where the time went", ""]
    for st, phase in todo:
        rows = hotspots.where(s, st, phase)
        if not rows:
            continue
        p = next(x for x in st.phases if x.name == phase)
        out += [f"`{st.name}` / `{phase}`: {p.seconds:.2f} s" + (" (still running when stopped)" if p.open else ""),
                "", "| line | code | seconds | share | loop (iterations) | inside |", "|---|---|---|---|---|---|"]
        for r in rows:
            loop = "" if not r["loop"] else f"L{r['loop']}" + (f" ({r['iterations']:,})" if r["iterations"] else "")
            inside = hotspots.mechanism_words(r.get("mechanism"))
            out.append(f"| L{r['line']} | {code_span(r['code'])} | {r['seconds']:.2f} | {r['share']:.0%} | {loop} | "
                       f"{inside} |")
        out.append("")
    cost = sum(st.sample_cost_s for st in base.stages)
    wall = sum(st.wall_s for st in base.stages)
    interval = next((st.sample_interval_s for st in base.stages if st.sample_interval_s), 0.01)
    out += [f"_Sampled every {interval * 1000:.0f} ms (never inside a timing section); sampling cost the child "
            f"{cost:.2f} s of {wall:.1f} s. Loop iterations are counted on Python 3.12 and newer._", ""]
    return out if len(out) > 3 else []


def _fix(s: Session, cl: list[Claim]) -> list[str]:
    fix = claims.one(cl, "fix")
    if fix is None:
        return []
    f = s.fix
    text = fix.text.replace(fix.title, code_span(fix.title), 1) if fix.title else fix.text
    out = ["## Verified fix", "", f"{text}.", "", *fence(f.diff.rstrip(), "diff"), ""]
    if f.state:
        out[4:4] = [f"Its run differs from the baseline in state kept between processes: {f.state}.", ""]
    # an alternative the choice never reached is measured, but not shown to pass the stages it did not run
    unrun = ", and of each alternative the choice never reached" if any(c.not_run for c in f.costs) else ""
    costs = [f"Steady-state cost of every working fix{unrun} (geometric mean of the benchmark shapes' median per-call "
             "time):", "", "| fix | steady µs | vs this fix |", "|---|---|---|"]
    for c in f.costs:
        vs = "n/a" if c.delta_us is None else "this fix" if c.run == f.run else \
            f"{round(c.delta_us, 1) + 0.0:+.1f} µs per call"
        vs += f" ({', '.join(c.not_run)} not run: the fix was chosen first)" if c.not_run else ""
        costs.append(f"| {c.probe}: {c.toggle} | {_s(c.steady_us, '', 1)} | {vs} |")
    return out + md_public.details("the steady-state cost of every working fix", costs)


def _evidence(s: Session, cl: list[Claim]) -> list[str]:
    out = ["## Evidence per run", "", "| run | variant | outcome | import | compile | first call (compile / "
           "capture / rest) | recompiles | steady µs | worst stage vs budget | lock wait | beside |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s.runs:
        row = summary.run_row(r)
        fc = row["first_call"]
        fcs = "n/a" if not fc else (f"{fc['total_s']:.2f} s ({fc['compile_s']:.2f} / {fc['capture_s']:.2f} / "
                                    f"{fc['rest_s']:.2f}){' †' if fc['open'] else ''}")
        w = row["worst_stage"]
        ws = f"{w[2]} {w[0]:.1f} / {w[1]:.0f} s" if w else "n/a"
        note = f" ({r.note})" if r.note else ""
        wait = sum(st.lock_wait_s for st in r.stages)
        beside = "solo" if r.solo else (str(len({o for st in r.stages for o in st.contention.overlapped})) + " runs")
        out.append(f"| {r.id} | {_name(r)}{note} | **{r.outcome}** | {_s(row['import_s'])} | "
                   f"{_s(row['compile_s'])} | {fcs} | {row['recompiles']} | {_s(row['steady_us'], '', 1)} | {ws} | "
                   f"{wait:.1f} s | {beside} |")
    out += ["", "† the phase was still open when the process died or was stopped. Lock wait is time spent queued "
                "for the GPU; it is not charged to the budget.", ""]
    said = claims.by_kind(cl, "probe")
    if said:
        out += ["Probes:", ""] + [f"- `{c.title}`: {c.detail}: {c.text}" for c in said] + [""]
    for c in claims.by_kind(cl, "measure"):
        out += [f"{c.text}.", ""]
    return out


def _gantt(s: Session) -> list[str]:
    """Mermaid gantt in milliseconds (`dateFormat x`), each stage on its own clock from 0."""
    base = s.baseline
    fix = s.run(s.fix.run) if s.fix else None
    if base is None or not any(st.phases for st in base.stages):
        return []
    out = ["## Timeline", "", "```mermaid", "gantt", "    dateFormat x", "    axisFormat %M:%S"]
    for run in [base] + ([fix] if fix else []):
        for st in run.stages:
            if not st.phases:
                continue
            out.append(f"    section {'baseline' if run is base else 'fix'} {st.name}")
            for p in st.phases:
                if p.end_s - p.start_s < 0.05 and not p.open:
                    continue
                tag = "crit, " if p.open or not p.ok else ""
                start = int(p.start_s * 1000)
                label = p.name.replace(":", " ").replace(";", " ").replace("#", " ")
                out.append(f"    {label} :{tag}{start}, {max(int(p.end_s * 1000), start + 1)}")
    out += ["```", "", "_Axis: minutes:seconds from the start of each stage._", ""]
    return out


def _suspects(s: Session) -> list[str]:
    out = ["## Suspects found in the source", ""]
    if not s.scan:
        return out + ["None.", ""]
    return out + [f"- `{x['suspect']}` L{x['line']}: {code_span(x['code'])}" for x in s.scan] + [""]


def _environment(s: Session) -> list[str]:
    e = s.environment
    h = s.harness
    waits = sum(st.lock_wait_s for r in s.runs for st in r.stages)
    delay = sum(st.contention.run_delay_s for r in s.runs for st in r.stages)
    keys = [("GPU", e.get("gpu")), ("driver", e.get("driver")), ("CUDA", e.get("cuda")), ("torch", e.get("torch")),
            ("triton", e.get("triton")), ("python", e.get("python")), ("CPUs", e.get("cpu_count")),
            ("task", f"{s.task.get('name')} ({s.task.get('shape_set')} shapes)"),
            ("harness", f"{h.get('name')}, depth {h.get('depth')}, stages {', '.join(h.get('stages', []))}"),
            ("evaluator", h.get("evaluator")),
            ("budgets", ", ".join(f"{k} {v:g} s" for k, v in h.get("budgets", {}).items())),
            *md_state.container_rows(s),
            ("L2 flush", h.get("flush")),
            ("concurrency", f"{h.get('concurrency', 'one run at a time')}; at most {summary.overlap(s)} overlapped"),
            ("GPU lock waits", f"{waits:.1f} s in all, none charged to a budget"),
            ("CPU waits", f"{delay:.1f} s in all (time the runs' processes were ready but had no CPU)")]
    return ["## Environment", "", "| | |", "|---|---|"] + [f"| {k} | {v if v is not None else 'n/a'} |"
                                                          for k, v in keys] + [""]


def render(session: Session, cl: list[Claim] | None = None) -> str:
    s = session
    cl = claims.derive(s) if cl is None else cl    # every statement of the conclusions comes from these
    lines = _head(s, cl)
    took = "" if s.diagnosis_s is None else (f" · verdict at {s.verdict_at_s:.0f} s" if s.verdict_at_s else "") + \
        (f" · causes at {s.cause_at_s:.0f} s" if s.cause_at_s else "") + f" · diagnosis {s.diagnosis_s:.0f} s"
    lines += [f"_{s.created} · diagnose {s.tool_version} · session schema {s.schema_version}{took}_", ""]
    fold = md_public.fold     # the first screen: verdict, causes, fix and its diff; the evidence folded below
    if s.edit_bisect:    # `diagnose bisect`: the search, then the runs behind it
        lines += _verdict(s, cl) + md_bisect.sections(s) + fold(_evidence(s, cl)) + fold(_environment(s))
    else:
        lines += _verdict(s, cl) + _causes(s, cl) + fold(_where(s)) + _fix(s, cl) + fold(_evidence(s, cl))
        for part in (_gantt, _suspects, md_stages.stages, md_stages.failure, md_stages.compile_metrics,
                     *md_libs.probe_sections(), md_state.state, _environment):
            lines += fold(part(s))
    lines += ["## Reproduce", "", *fence(shlex.join(s.command), "sh"), ""] + [f"- {n}" for n in s.notes]
    return md_public.publish("\n".join(lines).rstrip() + "\n", s)
