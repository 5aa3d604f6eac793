"""Rebuild a stage's record from what the child sent, even when it was killed halfway.

Phases come from begin/end events (a begin with no end is the phase the child was in when it died);
the status follows from the events, the exit code and why we stopped it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from diagnose.runs.harness import in_pool_worker, lost_task
from diagnose.runs.runner.child import ChildResult
from diagnose.runs.runner.sites import frames_from_text, frames_site, stack_site, tidy, undouble
from diagnose.runs.runner.stage_facts import (
    fill_probes,
    fill_samples,
    needs_gpu_reason,
    parse_report,
    report_failure,
    state_of,
    timing_of,
)
from diagnose.session import Contention, Phase, StageResult
from diagnose.status import Status


def _overlap(a: float, b: float, spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


def _phases(events: list[dict], t0: float, t_last: float, held_up: list = ()) -> list[Phase]:
    out, stack = [], []
    for ev in events:
        if ev["k"] == "begin":
            stack.append((ev["name"], ev["t"]))
        elif ev["k"] == "end" and stack:
            # pop up to the matching begin: anything above it was left open by an exception
            while stack:
                name, start = stack.pop()
                closed = name == ev["name"]
                out.append(Phase(name, round(start - t0, 4), round(ev["t"] - t0, 4),
                                 ok=closed and ev.get("ok", True),
                                 held_s=round(_overlap(start, ev["t"], held_up), 4)))
                if closed:
                    break
    for name, start in reversed(stack):
        out.append(Phase(name, round(start - t0, 4), round(t_last - t0, 4), open=True, ok=False,
                         held_s=round(_overlap(start, t_last, held_up), 4)))
    return sorted(out, key=lambda p: (p.start_s, -p.end_s))


def build_stage(name: str, child: ChildResult, budget_s: float, submission_file: str,
                evaluated: bool = False) -> StageResult:
    """The stage's record, judged from what the parent observed.

    The child's events are claims. A stage is ok only if the child reported the stage done, exited by
    itself with status 0, and got through the interpreter's exit; a `stage_done` that arrives while a
    phase is still open is impossible for the worker and is taken as the submission forging it."""
    st, ev, t0, t_last = _record(name, child, budget_s)
    v = _seen(st, child, ev)
    if not _judge_stopped(st, child, v, budget_s, submission_file, t0, t_last):
        _judge_ended(st, child, v, submission_file, evaluated)
    if st.anomalies and st.status == Status.OK:
        st.message = "the tool's event channel carried events the worker did not send (see anomalies)"
    return st


def _record(name: str, child: ChildResult, budget_s: float):
    """Everything the stage recorded, before any judgement: phases, resources, compiles, timing,
    samples, state and libraries."""
    ev = child.events
    for e in ev:
        if e["k"] in ("exception", "worker_error"):
            e["traceback"] = tidy(e.get("traceback", ""))
            e["message"] = undouble(tidy(e.get("message", "")))
            for f in e.get("frames") or []:
                f["file"] = tidy(f" {f.get('file', '')}").lstrip()
    t0 = child.start_t
    t_last = child.kill_t or (t0 + child.wall_s)
    st = StageResult(name=name, status=Status.OK, wall_s=round(child.wall_s, 4), budget_s=budget_s,
                     phases=_phases([e for e in ev if e["k"] in ("begin", "end")], t0, t_last, child.held_up),
                     exit_code=child.exit_code, signal=child.signal,
                     killed=child.killed, cpu_s=round(child.cpu_s, 3), user_s=round(child.user_s, 3),
                     peak_rss_mb=round(child.peak_rss_mb, 1), processes=child.max_procs,
                     survivors=child.survivors, stdout_tail=child.stdout_tail, stderr_tail=tidy(child.stderr_tail),
                     stdout_bytes=child.stdout_bytes, stderr_bytes=child.stderr_bytes, stacks=tidy(child.stacks),
                     lock_waits=child.lock_waits, anomalies=list(child.anomalies),
                     contention=Contention(overlapped=child.overlapped, run_delay_s=child.run_delay_s,
                                           paused_s=round(sum(w["seconds"] for w in child.lock_waits
                                                              if w["mode"] == "pause"), 3),
                                           load_per_cpu=child.load_per_cpu, cpus=os.cpu_count() or 0,
                                           others_cpu_s=child.others_cpu_s),
                     # the per-path events, summed up below; a probe's running records live in its facts alone
                     events=[e for e in ev if e["k"] != "state" and not (e["k"] == "probe" and "slot" in e)])
    # charged: the wall less the time held up, by the same measure the report shows as waits
    st.charged_s = round(max(0.0, st.wall_s - st.lock_wait_s), 4)
    st.state = state_of(ev)
    st.end_t = t_last      # what a probe's own event still open at the end ran until (its facts say when it began)
    fill_probes(st, ev)
    ev = st.events
    st.compile = [e for e in ev if e["k"] == "compile"]
    st.start_t = t0      # a probe's own events keep their time: its facts read them against the stage's start
    st.timing = timing_of(ev)
    overruns = [(t0 + w["start_s"], t0 + w["start_s"] + w["seconds"]) for w in child.lock_waits
                if w["mode"] == "overrun"]
    for p in st.phases:    # a timing section that outlived its hold on the machine was not timed alone
        case = p.name.split(":", 1)[1] if p.name.startswith("timing:") else None
        if case in st.timing and _overlap(t0 + p.start_s, t0 + p.end_s, overruns) > 0:
            st.timing[case]["alone"] = False
    st.reached = sorted({e["line"] for e in ev if e["k"] == "reached"})
    fill_samples(st, ev)
    gpu = [e["gpu_peak_mb"] for e in ev if e["k"] == "end" and isinstance(e.get("gpu_peak_mb"), (int, float))]
    st.peak_gpu_mb = round(max(gpu), 1) if gpu else None
    return st, ev, t0, t_last


@dataclass
class _Seen:
    """What the events say about how the stage ended, for the judgement."""
    innermost_open: str | None
    exc: dict | None
    wrong: dict | None
    done: dict | None
    werr: dict | None
    clean: bool
    tamper: list
    forged: set
    needs: str | None
    how: str


def _seen(st: StageResult, child: ChildResult, ev: list[dict]) -> _Seen:
    """The events that decide the outcome (a forged 'stage done': one sent while a phase was still open)."""
    open_phases = [p for p in st.phases if p.open]
    innermost_open = open_phases[-1].name if open_phases else None
    exc = next((e for e in ev if e["k"] == "exception"), None)
    wrong = next((e for e in ev if e["k"] == "check" and not e["ok"]), None)
    done = next((e for e in ev if e["k"] == "stage_done"), None)
    werr = next((e for e in ev if e["k"] == "worker_error"), None)
    clean = any(e["k"] == "exit_clean" for e in ev)
    tamper = [e for e in ev if e["k"] == "tamper"]
    forged = done is not None and _open_at(ev, done) - {"interpreter_exit"}
    needs = needs_gpu_reason(ev)
    how = f"signal {child.signal}" if child.signal else f"exit code {child.exit_code}"
    return _Seen(innermost_open, exc, wrong, done, werr, clean, tamper, forged, needs, how)


def _judge_stopped(st: StageResult, child: ChildResult, v: _Seen, budget_s: float, submission_file: str,
                   t0: float, t_last: float) -> bool:
    """A stage the parent stopped or caught tampering: tampered, timed out, interrupted, killed. False when
    none of these, and the stage ended by itself."""
    if v.tamper or v.forged:
        st.status, st.phase = Status.TAMPERED, v.innermost_open
        placed = [e for e in v.tamper if isinstance(e.get("file"), str) and isinstance(e.get("line"), int)]
        st.site = (frames_site([{"file": e["file"], "line": e["line"], "func": "", "code": str(e.get("code", ""))}
                                for e in placed[:1]], submission_file) or stack_site(child.stacks, submission_file))
        st.message = ("; ".join(e["what"] for e in v.tamper[:3]) if v.tamper else
                      f"the submission wrote a 'stage done' to the tool's channel while "
                      f"{', '.join(sorted(v.forged))} was still running")
    elif child.killed == "deadline" and child.exited_s is not None:
        st.phases.append(Phase("outputs_open", child.exited_s, round(t_last - t0, 4), open=True, ok=False))
        st.status, st.phase = Status.TIMEOUT, "outputs_open"
        spawn = [e for e in child.events if e["k"] == "state" and e.get("op") == "spawn" and e.get("line")]
        st.site = frames_site([{"file": spawn[-1]["file"], "line": spawn[-1]["line"], "func": "", "code": ""}],
                              submission_file) if spawn else None
        st.message = (f"the process exited {child.exited_s:.1f} s in, but its stdout or stderr stayed open until the "
                      f"{budget_s:g} s budget ran out ({'; '.join(child.held_by) or 'held by a process it started'}): "
                      f"the harness waits for both to close")
    elif child.killed == "deadline":
        st.status, st.phase = Status.TIMEOUT, v.innermost_open
        st.site = stack_site(child.stacks, submission_file)
        if st.phase == "interpreter_exit":
            st.message = (f"the stage finished, but the process did not exit within the {budget_s:g} s budget: "
                          f"a non-daemon thread or an atexit handler never ended")
        else:
            st.message = f"exceeded the {budget_s:g} s budget {_where(st.phases, v.innermost_open)}"
    elif child.killed == "interrupted":
        st.status, st.phase = Status.INTERRUPTED, v.innermost_open
        st.message = "interrupted by the user"
    elif child.killed:
        st.status, st.phase = Status.CRASH, v.innermost_open
        st.site = stack_site(child.stacks, submission_file)
        st.message = {"max_rss": f"killed: the process tree passed the --max-rss limit "
                                 f"({child.peak_rss_mb:.0f} MB)"}.get(child.killed, child.killed)
    else:
        return False
    return True


def _judge_ended(st: StageResult, child: ChildResult, v: _Seen, submission_file: str, evaluated: bool) -> None:
    """A stage that ended by itself: its outcome from what the worker (or the problem's evaluator) said."""
    ev = st.events
    if v.needs and (v.exc or v.werr):
        st.status, st.phase = Status.NEEDS_GPU, (v.exc or {}).get("phase") or v.innermost_open
        st.message = v.needs
    elif v.exc:
        # in a problem's evaluator the failing phase may be in the pool worker: the last one that failed
        failed = [p for p in st.phases if not p.ok and not p.open]
        st.status, st.phase = Status.CRASH, v.exc.get("phase") or (failed[-1].name if failed else None)
        st.exception = {k: v.exc.get(k) for k in ("type", "message", "traceback", "frames")}
        st.site = frames_site(v.exc.get("frames"), submission_file) or frames_site(
            frames_from_text(v.exc.get("traceback", "")), submission_file)
        msg = v.exc["message"].strip().splitlines()[0] if v.exc["message"].strip() else ""
        st.message = f"{v.exc['type']}: {msg}" if msg else v.exc["type"]
        if v.exc.get("escapes") is True and in_pool_worker(st.name, st.phase, evaluated):
            _lost(st, st.message)
    elif v.werr:
        st.status, st.phase = Status.CRASH, v.innermost_open
        st.message = f"the worker failed before the stage: {v.werr['type']}: {v.werr['message']}"
    elif v.done and (child.exit_code != 0 or not v.clean):
        st.status, st.phase = Status.CRASH, "interpreter_exit"
        st.site = stack_site(child.stacks, submission_file)
        st.message = (f"the stage finished, but the process then ended with {v.how} instead of exiting "
                      f"normally (at exit: a non-daemon thread, an atexit handler or os._exit)")
    elif v.done and evaluated:
        rep = parse_report(child.report)
        st.evaluator = {"report": rep, "exit": next((e.get("code") for e in ev if e["k"] == "evaluator_exit"), None)}
        if rep.get("check") == "pass":
            st.status = Status.OK
        elif rep.get("check") == "fail":
            st.status = Status.WRONG
            st.phase, st.message = report_failure(rep)
        else:
            st.status, st.phase = Status.CRASH, v.innermost_open
            st.message = "the problem's evaluator ended without a verdict (no 'check:' line in its report)"
    elif v.done and v.done["status"] == "wrong":
        st.status, st.phase = Status.WRONG, f"check:{v.wrong['case']}" if v.wrong else None
        w = v.wrong or {}
        st.message = (f"check failed on {w.get('case')} (output {w.get('index', 0)}): {w.get('message', '')}"
                      if v.wrong else "check failed")
    elif v.done:
        st.status = Status.OK
    else:
        st.status, st.phase = Status.CRASH, v.innermost_open
        # a submission that enabled faulthandler itself sends the fatal-signal dump to stderr, not to us
        st.site = stack_site(child.stacks, submission_file) or stack_site(child.stderr_tail, submission_file)
        st.message = f"the process ended ({v.how}) {_where(st.phases, v.innermost_open)} without finishing the stage"
        if in_pool_worker(st.name, st.phase, evaluated):
            _lost(st, v.how)


def _lost(st: StageResult, how: str) -> None:
    """The built-in model's pool worker died where the harness's would have: the harness never gets the task's
    answer and reports the stage timed out. Ours ended at once; the message says what the harness would do."""
    st.status, st.lost_worker = Status.TIMEOUT, {"how": how, "phase": st.phase}
    st.message = lost_task(how, st.phase, st.budget_s)


def _where(phases: list[Phase], innermost_open: str | None) -> str:
    if innermost_open:
        return f"in {innermost_open}"
    closed = [p for p in phases if not p.open]
    return f"after {max(closed, key=lambda p: p.end_s).name}" if closed else "in start-up"


def _open_at(ev: list[dict], upto: dict) -> set[str]:
    """Phases of the worker's own process still open when `upto` arrived."""
    open_: list[str] = []
    for e in ev:
        if e is upto:
            break
        if e.get("pid") != upto.get("pid"):
            continue
        if e["k"] == "begin":
            open_.append(e["name"])
        elif e["k"] == "end" and e["name"] in open_:
            del open_[len(open_) - 1 - open_[::-1].index(e["name"]):]
    return set(open_)


