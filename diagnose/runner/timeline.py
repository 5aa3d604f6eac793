"""Rebuild a stage's record from what the child sent, even when it was killed halfway.

Phases come from begin/end events (a begin with no end is the phase the child was in when it died);
the status follows from the events, the exit code and why we stopped it.
"""
from __future__ import annotations

import os
import re

from diagnose import harness
from diagnose.runner import TOOL_ROOT
from diagnose.runner.arbiter import union_seconds
from diagnose.runner.isolate import ChildResult
from diagnose.session import Contention, Phase, StageResult, Status

_SITE_PACKAGES = re.compile(r'(?<=["\s])/[^"\s]*?/(site-packages|dist-packages)/')


def tidy(text: str) -> str:
    """Shorten installation prefixes in stacks and tracebacks: '…/site-packages/torch/...' and
    '…/diagnose/worker/...' read the same on every machine, and a report attached to a ticket should not
    carry the host's directory layout."""
    return _SITE_PACKAGES.sub(r"…/\1/", text or "").replace(TOOL_ROOT + os.sep, "…/")


_STACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


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


def _captures(events: list[dict], t0: float) -> list[dict]:
    out, open_ = [], []
    for ev in events:
        if ev["k"] == "capture_begin":
            open_.append(ev)
        elif ev["k"] == "capture_end" and open_:
            b = open_.pop()
            out.append({"origin": b["origin"], "phase": b.get("phase"), "start_s": b["t"] - t0,
                        "end_s": ev["t"] - t0})
    out += [{"origin": b["origin"], "phase": b.get("phase"), "start_s": b["t"] - t0, "end_s": None}
            for b in open_]
    return out


def culprit(frames: list[dict], submission_file: str) -> dict | None:
    """The submission line that matters in a stack (frames outermost first): the last submission frame
    before the stack first leaves the submission for good or for torch. A compiled function's own frame,
    re-entered from inside torch, is not it: the line that called into torch is."""
    mine = [os.path.realpath(f["file"]) == os.path.realpath(submission_file) for f in frames]
    if not any(mine):
        return None
    first = mine.index(True)
    last = first
    while last + 1 < len(frames) and mine[last + 1]:
        last += 1
    f = frames[last]
    innermost = frames[len(mine) - 1 - mine[::-1].index(True)]
    return {"file": f["file"], "line": f["line"], "func": f["func"], "code": f.get("code", ""),
            "innermost_line": innermost["line"]}


_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-f]+)")


def _main_thread_frames(stacks: str, submission_file: str) -> list[dict]:
    """Frames (outermost first) of the thread to blame. faulthandler lists threads newest first, so the
    main thread is the last of each dump; the file may hold several dumps (the child's own watchdog and
    the parent's request). The main thread's latest dump wins when it is in the submission; a helper
    thread's frames are used only when the main thread never is."""
    blocks: list[tuple[str, list[dict]]] = []
    for line in stacks.splitlines():
        t = _THREAD.match(line)
        if t:
            blocks.append((t.group(1), []))
            continue
        m = _STACK_FRAME.match(line)
        if m:
            if not blocks:
                blocks.append(("?", []))
            blocks[-1][1].append({"file": m["file"], "line": int(m["line"]), "func": m["func"]})
    if not blocks:
        return []
    base = os.path.realpath(submission_file)
    mine = [(tid, fr) for tid, fr in blocks if any(os.path.realpath(f["file"]) == base for f in fr)]
    main_id = blocks[-1][0]
    ordered = [b for b in mine if b[0] == main_id] or mine
    return list(reversed(ordered[-1][1])) if ordered else []


def stack_site(stacks: str, submission_file: str) -> dict | None:
    return culprit(_main_thread_frames(stacks, submission_file), submission_file)


def frames_site(frames: list[dict], submission_file: str) -> dict | None:
    return culprit(frames or [], submission_file)


def _timing(events: list[dict]) -> dict:
    out = {}
    for ev in events:
        if ev["k"] == "timing":
            entry = {k: ev[k] for k in ("per_call_s", "repeat_wall_s", "depth", "stop_reason")}
            if len(ev["per_call_s"]) >= 2:
                p = harness.predict_case(ev["per_call_s"], ev["repeat_wall_s"])
                entry["predicted"] = {"repeats": p.repeats, "seconds": round(p.seconds, 3), "reason": p.reason,
                                      "cv": round(p.cv, 5), "low_s": round(p.low_s, 3), "high_s": round(p.high_s, 3)}
            out[ev["case"]] = entry
    return out


def _samples(st: StageResult, ev: list[dict]) -> None:
    """Sum the sampler's and the loop counter's streamed deltas per phase; keep the compile calls."""
    for e in ev:
        if e["k"] == "samples":
            st.sample_interval_s = e["interval_s"]
            st.sample_cost_s = max(st.sample_cost_s, float(e.get("cost_s") or 0))
            for phase, kinds in e["phases"].items():
                if not isinstance(kinds, dict):
                    continue
                tgt = st.samples.setdefault(str(phase), {})
                for kind, counts in kinds.items():
                    if isinstance(counts, dict):
                        c = tgt.setdefault(str(kind), {})
                        for line, n in counts.items():
                            # a line number; for mechanisms, "line|mechanism"
                            if str(line).split("|", 1)[0].isdigit() and isinstance(n, int):
                                c[str(line)[:80]] = c.get(str(line)[:80], 0) + n
        elif e["k"] == "loops":
            c = st.loops.setdefault(str(e.get("phase")), {})
            for line, n in e["counts"].items():
                if str(line).isdigit() and isinstance(n, int):
                    c[str(line)] = c.get(str(line), 0) + n
        elif e["k"] == "compile_call" and len(st.compile_calls) < 200:
            st.compile_calls.append({k: v for k, v in e.items() if k not in ("k", "pid")})


def _state(ev: list[dict]) -> dict:
    """What the child said about state that outlives it (worker/state.py), and how its container was
    walled off (worker/container.py). The paths it kept reachable name this machine's layout: only their
    count is kept."""
    rec: dict = {"reads": [], "writes": [], "outside": [], "spawned": [], "cut": False}
    for e in ev:
        if e["k"] == "container" and "container" not in rec:
            rec["container"] = {"namespace": e.get("namespace"), "private": e.get("private"),
                                "kept": len(e.get("kept") or []), "why": e.get("why")}
        elif e["k"] != "state":
            continue
        elif e["op"] == "spawn":
            rec["spawned"].append(str(e.get("argv", ""))[:300])
        elif e["op"] == "cut":
            rec["cut"] = True
        elif isinstance(e.get("path"), str):
            if e.get("inside") is False:
                rec["outside"].append({"op": e["op"], "path": e["path"]})
            elif e["op"] == "read":
                rec["reads"].append(e["path"])
            else:
                rec["writes"].append({"op": e["op"], "path": e["path"]})
    return rec


def _libraries(st: StageResult, ev: list[dict], submission_file: str, t_last: float) -> None:
    """Autotuning per (kernel, key), summed from its per-config events, and every extension build."""
    mine = os.path.realpath(submission_file)
    tunes: dict[tuple, dict] = {}
    for e in ev:
        if e["k"] not in ("autotune_config", "autotune_done"):
            continue
        line = e.get("line") if isinstance(e.get("file"), str) and os.path.realpath(e["file"]) == mine else None
        r = tunes.setdefault((e["kernel"], str(e.get("key"))), {
            "kernel": e["kernel"], "line": line, "key": str(e.get("key")), "tried": 0, "seconds": 0.0,
            "best": None, "winner": None, "done": False})
        if e["k"] == "autotune_config":
            r["tried"] += 1
            r["seconds"] = round(r["seconds"] + float(e.get("seconds") or 0), 4)
            ms = e.get("ms")
            if isinstance(ms, (int, float)) and (r["best"] is None or ms < r["best"]["ms"]):
                r["best"] = {"config": e["config"], "ms": ms}
        else:
            r.update(done=True, winner=e["winner"], configs=e.get("configs"), tuning_s=e.get("seconds"))
    st.autotune = list(tunes.values())
    st.builds = [{k: e.get(k) for k in ("name", "seconds", "ok", "built", "found_lock", "sources", "cflags",
                                         "cuda_cflags", "with_cuda", "arch_list")}
                 for e in ev if e["k"] == "extension_build"]
    started = [e for e in ev if e["k"] == "extension_build_start"]
    for e in started[len(st.builds):]:     # still building when the process ended: how long it had run
        st.builds.append({"name": e["name"], "ok": None, "built": [], "found_lock": e.get("found_lock"),
                          "seconds": round(max(0.0, t_last - e["t"]), 3)})


def _needs_gpu(ev: list[dict]) -> str | None:
    return next((e["reason"] for e in ev if e["k"] == "needs_gpu"), None)


def parse_report(text: str) -> dict[str, str]:
    """A problem evaluator's report: one 'key: value' per line, in order."""
    out: dict[str, str] = {}
    for line in text.splitlines()[:5000]:
        key, sep, value = line.partition(": ")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()[:2000]
    return out


def _report_failure(rep: dict[str, str]) -> tuple[str | None, str]:
    """(phase, message) of the first failing case the evaluator reported."""
    for key, value in rep.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[2] == "status" and value == "fail":
            kind, idx = parts[0], parts[1]
            spec = rep.get(f"{kind}.{idx}.spec", "")
            case = {}
            for item in spec.split(";"):
                k, _, v = item.partition(":")
                if k.strip():
                    case[k.strip()] = int(v) if v.strip().lstrip("+-").isdigit() else v.strip()
            from diagnose.tasks.loader import case_label
            return f"check:{case_label(case) if case else kind + '.' + idx}", \
                rep.get(f"{kind}.{idx}.error", "the evaluator reported a failure")
    return None, "the evaluator reported check: fail"


_TEXT_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def _frames_from_text(text: str) -> list[dict]:
    """Frames named in a traceback's text: a pool worker's traceback reaches the evaluator only as text."""
    return [{"file": m["file"], "line": int(m["line"]), "func": m["func"]} for m in _TEXT_FRAME.finditer(text or "")]


def build_stage(name: str, child: ChildResult, budget_s: float, submission_file: str,
                evaluated: bool = False) -> StageResult:
    """The stage's record, judged from what the parent observed.

    The child's events are claims. A stage is ok only if the child reported the stage done, exited by
    itself with status 0, and got through the interpreter's exit; a `stage_done` that arrives while a
    phase is still open is impossible for the worker and is taken as the submission forging it."""
    ev = child.events
    for e in ev:
        if e["k"] in ("exception", "worker_error"):
            e["traceback"] = tidy(e.get("traceback", ""))
            e["message"] = tidy(e.get("message", ""))
            for f in e.get("frames") or []:
                f["file"] = tidy(f" {f.get('file', '')}").lstrip()
    t0 = child.start_t
    t_last = child.kill_t or (t0 + child.wall_s)
    waits = round(union_seconds(child.held_up), 4)
    st = StageResult(name=name, status=Status.OK, wall_s=round(child.wall_s, 4), budget_s=budget_s,
                     charged_s=round(max(0.0, child.wall_s - waits), 4),
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
                     # the per-path and per-config events, summed up below
                     events=[e for e in ev if e["k"] not in ("state", "autotune_config")])
    st.state = _state(ev)
    _libraries(st, ev, submission_file, t_last)
    detail = next((e for e in ev if e["k"] == "wrong_detail"), None)
    if detail:
        st.numerics = {k: detail.get(k) for k in ("case", "stats", "reference", "submission")}
    ev = st.events
    st.compile = [e for e in ev if e["k"] == "compile"]
    st.captures = _captures(ev, t0)
    st.timing = _timing(ev)
    overruns = [(t0 + w["start_s"], t0 + w["start_s"] + w["seconds"]) for w in child.lock_waits if w["mode"] == "overrun"]
    for p in st.phases:    # a timing section that outlived its hold on the machine was not timed alone
        case = p.name.split(":", 1)[1] if p.name.startswith("timing:") else None
        if case in st.timing and _overlap(t0 + p.start_s, t0 + p.end_s, overruns) > 0:
            st.timing[case]["alone"] = False
    st.reached = sorted({e["line"] for e in ev if e["k"] == "reached"})
    _samples(st, ev)
    gpu = [e["gpu_peak_mb"] for e in ev if e["k"] == "end" and isinstance(e.get("gpu_peak_mb"), (int, float))]
    st.peak_gpu_mb = round(max(gpu), 1) if gpu else None
    open_phases = [p for p in st.phases if p.open]
    innermost_open = open_phases[-1].name if open_phases else None
    exc = next((e for e in ev if e["k"] == "exception"), None)
    wrong = next((e for e in ev if e["k"] == "check" and not e["ok"]), None)
    done = next((e for e in ev if e["k"] == "stage_done"), None)
    werr = next((e for e in ev if e["k"] == "worker_error"), None)
    clean = any(e["k"] == "exit_clean" for e in ev)
    tamper = [e for e in ev if e["k"] == "tamper"]
    forged = done is not None and _open_at(ev, done) - {"interpreter_exit"}
    needs = _needs_gpu(ev)
    how = f"signal {child.signal}" if child.signal else f"exit code {child.exit_code}"

    if tamper or forged:
        st.status, st.phase = Status.TAMPERED, innermost_open
        placed = [e for e in tamper if isinstance(e.get("file"), str) and isinstance(e.get("line"), int)]
        st.site = (frames_site([{"file": e["file"], "line": e["line"], "func": "", "code": str(e.get("code", ""))}
                                for e in placed[:1]], submission_file) or stack_site(child.stacks, submission_file))
        st.message = ("; ".join(e["what"] for e in tamper[:3]) if tamper else
                      f"the submission wrote a 'stage done' to the tool's channel while "
                      f"{', '.join(sorted(forged))} was still running")
    elif child.killed == "deadline":
        st.status, st.phase = Status.TIMEOUT, innermost_open
        st.site = stack_site(child.stacks, submission_file)
        if st.phase == "interpreter_exit":
            st.message = (f"the stage finished, but the process did not exit within the {budget_s:g} s budget: "
                          f"a non-daemon thread or an atexit handler never ended")
        else:
            st.message = f"exceeded the {budget_s:g} s budget {_where(st.phases, innermost_open)}"
    elif child.killed == "interrupted":
        st.status, st.phase = Status.INTERRUPTED, innermost_open
        st.message = "interrupted by the user"
    elif child.killed:
        st.status, st.phase = Status.CRASH, innermost_open
        st.site = stack_site(child.stacks, submission_file)
        st.message = {"max_rss": f"killed: the process tree passed the --max-rss limit "
                                 f"({child.peak_rss_mb:.0f} MB)"}.get(child.killed, child.killed)
    elif needs and (exc or werr):
        st.status, st.phase = Status.NEEDS_GPU, (exc or {}).get("phase") or innermost_open
        st.message = needs
    elif exc:
        # in a problem's evaluator the failing phase may be in the pool worker: the last one that failed
        failed = [p for p in st.phases if not p.ok and not p.open]
        st.status, st.phase = Status.CRASH, exc.get("phase") or (failed[-1].name if failed else None)
        st.exception = {k: exc.get(k) for k in ("type", "message", "traceback", "frames")}
        st.site = frames_site(exc.get("frames"), submission_file) or frames_site(
            _frames_from_text(exc.get("traceback", "")), submission_file)
        msg = exc["message"].strip().splitlines()[0] if exc["message"].strip() else ""
        st.message = f"{exc['type']}: {msg}" if msg else exc["type"]
    elif werr:
        st.status, st.phase = Status.CRASH, innermost_open
        st.message = f"the worker failed before the stage: {werr['type']}: {werr['message']}"
    elif done and (child.exit_code != 0 or not clean):
        st.status, st.phase = Status.CRASH, "interpreter_exit"
        st.site = stack_site(child.stacks, submission_file)
        st.message = (f"the stage finished, but the process then ended with {how} instead of exiting "
                      f"normally (at exit: a non-daemon thread, an atexit handler or os._exit)")
    elif done and evaluated:
        rep = parse_report(child.report)
        st.evaluator = {"report": rep, "exit": next((e.get("code") for e in ev if e["k"] == "evaluator_exit"), None)}
        if rep.get("check") == "pass":
            st.status = Status.OK
        elif rep.get("check") == "fail":
            st.status = Status.WRONG
            st.phase, st.message = _report_failure(rep)
        else:
            st.status, st.phase = Status.CRASH, innermost_open
            st.message = "the problem's evaluator ended without a verdict (no 'check:' line in its report)"
    elif done and done["status"] == "wrong":
        st.status, st.phase = Status.WRONG, f"check:{wrong['case']}" if wrong else None
        st.message = (f"check failed on {wrong['case']} (output {wrong.get('index', 0)}): {wrong.get('message', '')}"
                      if wrong else "check failed")
    elif done:
        st.status = Status.OK
    else:
        st.status, st.phase = Status.CRASH, innermost_open
        # a submission that enabled faulthandler itself sends the fatal-signal dump to stderr, not to us
        st.site = stack_site(child.stacks, submission_file) or stack_site(child.stderr_tail, submission_file)
        st.message = f"the process ended ({how}) {_where(st.phases, innermost_open)} without finishing the stage"
    if st.anomalies and st.status == Status.OK:
        st.message = "the tool's event channel carried events the worker did not send (see anomalies)"
    return st


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


def predict_stage(st: StageResult) -> None:
    """Predicted seconds for the whole stage: measured time outside the timing loops, plus each case's
    predicted timing loop from its sample."""
    if not st.timing:
        st.predicted_s = st.charged_s if st.status in (Status.OK, Status.AT_RISK) else None
        return
    measured_loops = sum(p.seconds for p in st.phases if p.name.startswith("timing:"))
    predicted = [t.get("predicted", {}) for t in st.timing.values()]
    rest = st.charged_s - measured_loops
    st.predicted_s = round(rest + sum(p.get("seconds", 0.0) for p in predicted), 3)
    st.predicted_range = [round(rest + sum(p.get(k, p.get("seconds", 0.0)) for p in predicted), 3)
                          for k in ("low_s", "high_s")]
