"""Progress while a diagnosis runs, fitted to where it runs.

- In a terminal: live rows (each running run's stage, phase and time against its budget) under a line
  "k of N runs done · elapsed · about T left"; the last frame stays on screen.
- Piped, or with CI set: one plain line per finished stage and per finished run, no colour, no wrapping.
- `-v` adds a plain line per finished phase; `-q` shows nothing while running.

Fed as the engine's observer, from several threads. Every text the submission controls
goes through rich.text.Text (never parsed as markup) or is written as plain text.
"""
from __future__ import annotations

import threading
import time

from rich.console import Group
from rich.table import Table
from rich.text import Text

from diagnose.engine.observer import Observer
from diagnose.findings import clip


def _label(run) -> str:
    return str(run.role) if run.probe is None else f"{run.probe}: {run.toggle}"


def _dur(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


WAIT_SHOWN_S = 0.05     # below this, wall and charged time print the same


def clock(st, of_budget: bool = True, cap: float | None = None) -> str:
    """A step's time on the clock its status was judged by: charged time (wall less the time it was kept waiting
    for the GPU or paused for another run's timing), with the wall time beside it when they differ. A time past
    the budget next to a pass says why it is there (`cap`: a CPU check's, which stops a stage instead)."""
    waited = st.wall_s - st.charged_s
    text = (f"in {st.charged_s:.1f} s charged ({st.wall_s:.1f} s wall, {waited:.1f} s waiting for the GPU)"
            if waited >= WAIT_SHOWN_S else f"in {st.wall_s:.1f} s")
    if st.budget_s:
        text += f" of {st.budget_s:g} s" if of_budget else ""
        past = st.charged_s - st.budget_s
        if str(st.status) == "ok" and past >= WAIT_SHOWN_S:
            text += (f" (past its budget by {past:.1f} s: no GPU here, so it ran to its checks, up to {cap:g} s, and "
                     f"its time is not judged)" if cap else
                     f" (past its budget by {past:.1f} s on this clock, yet its deadline did not stop it)")
    return text


def never_ran(run) -> bool:
    """A run the diagnosis ended before it started: no stage of it ran."""
    return all(str(st.status) == "skipped" for st in run.stages) and str(run.outcome) in ("interrupted", "skipped")


class Progress(Observer):
    """What is running and what is done, heard as the engine's observer (engine/observer.py); the renderers below
    only differ in how they show it."""

    def __init__(self, budgets: dict[str, float], planned):
        self.budgets = budgets
        self.planned = planned     # how many runs the engine has launched or queued so far (the session's runs)
        self.lock = threading.RLock()
        self.t0 = time.time()
        self.active: dict[str, dict] = {}
        self.done: list[tuple[str, str, str]] = []   # (run id, label, outcome)
        self.not_run = 0                             # runs the diagnosis ended before they started
        self._first_total = 0                        # the total the first counts line had: it only grows
        self.stopping = False                        # a run was stopped: no estimate of what is left
        self._shown: dict[str, int] = {}             # run id -> how many of its stages were shown
        self.early = ""                              # the verdict, once decided before the end
        self.cap: float | None = None                # a CPU check's stage cap (it stops a stage, not the budget)

    def on_event(self, run, stage: str, ev: dict) -> None:
        if str(run.role) == "reference":    # the preflight's (engine/preflight.py): never a row, never reported done
            return
        with self.lock:
            a = self.active.setdefault(run.id, {"label": _label(run), "stage": stage, "phase": "start",
                                                "t0": time.time(), "begun": {}})
            if a["stage"] != stage:
                a.update(stage=stage, t0=time.time(), phase="start", begun={})
            ended = None
            if ev.get("k") == "begin" and isinstance(ev.get("name"), str):
                a["phase"] = ev["name"]
                a["begun"][ev["name"]] = time.time()
            elif ev.get("k") == "end" and isinstance(ev.get("name"), str):
                began = a["begun"].pop(ev["name"], None)
                if began is not None:
                    ended = (ev["name"], time.time() - began)
        if ended:     # outside the lock: the renderer takes it again to write
            self.phase_done(run, stage, *ended)

    def on_stage(self, run) -> None:
        # every stage not shown yet: a failed stage arrives together with the skipped ones after it
        with self.lock:
            shown = self._shown.get(run.id, 0)
            self._shown[run.id] = len(run.stages)
        for st in run.stages[shown:]:
            self.stage_done(run, st)

    def on_run_done(self, run) -> None:
        with self.lock:
            self.active.pop(run.id, None)
            self.stopping = self.stopping or str(run.outcome) == "interrupted"
            if never_ran(run):
                self.not_run += 1
            else:
                self.done.append((run.id, _label(run), str(run.outcome)))
        self.run_done(run)

    def counts(self) -> str:
        """"k of N runs done": N is every run planned so far, less those never started, and grows as the
        diagnosis plans more from what it learns; an estimate from a total that has grown is a lower bound."""
        with self.lock:
            k, skipped = len(self.done), self.not_run
            n = max(k, self.planned() - skipped)
            self._first_total = self._first_total or n
            grew, stopping = n > self._first_total, self.stopping
        el = time.time() - self.t0
        if n == 0:
            return f"starting · {_dur(el)} elapsed"
        left = f" · {'at least' if grew else 'about'} {_dur(el / k * (n - k))} left" if 0 < k < n and not \
            stopping else ""
        never = f", {skipped} never started" if skipped else ""
        return f"{k} of {n} runs done{never} · {_dur(el)} elapsed{left}"

    def on_verdict(self, session, what: str, cl: list) -> None:
        from diagnose.analysis.audit import claims
        v = claims.one(cl, "verdict")
        if what == "verdict":
            text = f"verdict at {_dur(session.verdict_at_s or 0)}: {v.title} {v.text}; the causes follow"
        else:
            top = claims.by_kind(cl, "cause")
            text = (f"causes at {_dur(session.cause_at_s or 0)}: " +
                    (f"top cause {top[0].title}" if top else f"{v.title}, no cause found") +
                    "; confirmations and fix costs follow")
        with self.lock:
            self.early = text
        self.verdict_line(text)

    # what the renderers override
    def verdict_line(self, text: str) -> None:
        pass

    def phase_done(self, run, stage: str, phase: str, seconds: float) -> None:
        pass

    def stage_done(self, run, st) -> None:
        pass

    def run_done(self, run) -> None:
        pass


class LiveProgress(Progress):
    def __rich__(self):
        t = Table.grid(padding=(0, 2))       # the counts line sits above it: in it, it would widen a column
        with self.lock:
            for rid, label, outcome in self.done[-4:]:
                t.add_row(Text(rid, style="dim"), Text(label),
                          Text(outcome, style="green" if outcome == "ok" else "red"),
                          Text(""))
            for rid, a in self.active.items():
                el = time.time() - a["t0"]
                b = self.budgets.get(a["stage"], 0)
                t.add_row(Text(rid, style="cyan"), Text(a["label"]), Text(f"{a['stage']} · {a['phase']}"),
                          Text(f"{el:5.1f} s / {b:.0f} s", style="red" if b and el > 0.8 * b else ""))
        head = [Text(self.counts(), style="bold")] + ([Text(self.early)] if self.early else [])
        return Group(*head, t)


class PlainProgress(Progress):
    """Plain lines on a stream, one write per line, so lines from several threads never interleave."""

    def __init__(self, budgets: dict[str, float], planned, stream, verbose: bool = False):
        super().__init__(budgets, planned)
        self.stream, self.verbose = stream, verbose

    def _line(self, text: str) -> None:
        with self.lock:
            self.stream.write(text.replace("\n", " ") + "\n")
            self.stream.flush()

    def verdict_line(self, text: str) -> None:
        self._line(text)

    def phase_done(self, run, stage, phase, seconds) -> None:
        if self.verbose:
            self._line(f"{run.id} {stage} · {phase}: {seconds:.2f} s")

    def stage_done(self, run, st) -> None:
        if str(st.status) == "skipped":
            return
        budget = f" of {st.budget_s:g} s" if st.budget_s else ""
        msg = f": {clip(st.message, 160)}" if st.message and str(st.status) != "ok" else ""
        c = st.compile_step
        step = f" (after its compile step: {c.status} {clock(c, of_budget=False)})" if c is not None else ""
        when = (clock(st, cap=self.cap) if not st.lost_worker else
                f"when its pool worker died, {st.wall_s:.1f} s in (the harness waits out all{budget})")
        self._line(f"{run.id} {_label(run)} · {st.name} {st.status} {when}{msg}{step}")

    def run_done(self, run) -> None:
        if never_ran(run):
            self._line(f"{run.id} never started: {run.note or run.outcome} ({self.counts()})")
            return
        self._line(f"{run.id} done: {run.outcome} ({self.counts()})")
