"""Conclusions: the one owner of what the session concludes. Only this module sets the verdict (the preflight's,
the edit search's, a salvage's, a stopped diagnosis's and a problem this machine cannot judge come through
`settle`); it draws the verdict, causes, cleared suspects and fix from the runs so far (again after every
confirmation), says the early verdict, and runs the solo confirmations a time-based conclusion rests on.

The session is settled once per change: the pool's every save comes here (`changed`), the header is lifted from the
runs, and only a session that differs from the one last settled has its claims derived and is handed on (the
observer's on_change: the CLI writes it). Renderers, the console and the audit reuse those claims (`claims()`).
"""
from __future__ import annotations

import signal
import time

from diagnose.analysis.audit import claims
from diagnose.analysis.causes import bisector, fix_choice
from diagnose.analysis.verdict import carried, evidence, summary
from diagnose.engine.environment import lift
from diagnose.engine.observer import Observer
from diagnose.engine.runs import RunPool
from diagnose.findings import Verdict
from diagnose.session import Role, Run, Session
from diagnose.status import ENDS_RUN, FAILURES, Status, Warning_
from probes.base import WARM


class Conclusions:
    """The verdict, causes and fix drawn from the pool's runs, the solo confirmations they ask for, and the session
    settled once per change. The observer hears the verdict, then the causes, once each is decided before the end,
    and every change of the session."""

    def __init__(self, pool: RunPool, observer: Observer | None = None):
        self.pool, self.session, self.settings = pool, pool.session, pool.settings
        self.observer = observer or Observer()
        self.t0 = time.monotonic()
        self.version = 0                  # how many different sessions were settled
        self._last: dict | None = None    # the session as last settled, in plain data
        self._claims: list = []

    # -- the session settled once per change -------------------------------------------------------------
    def changed(self, session: Session | None = None) -> None:
        """The pool's on_save: the session may have changed. Handed on only when it did."""
        with self.pool.lock:
            if self._settle():
                self.observer.on_change(self.session, self._last, self._claims)

    def claims(self) -> list:
        """What the session states, as it stands now (settled again first, if it changed since)."""
        with self.pool.lock:
            self._settle()
            return self._claims

    def _settle(self) -> bool:
        lift(self.session)
        data = self.session.to_dict()
        if data == self._last:
            return False
        self._last, self._claims = data, claims.derive(self.session)
        self.version += 1
        return True

    def settle(self, verdict: Verdict, complete: bool | None = None) -> None:
        """The verdict decided elsewhere in the engine (the preflight, the edit search): set here, the one place."""
        with self.pool.lock:
            self.session.verdict = verdict
            if complete is not None:
                self.session.complete = complete

    def say_early(self, what: str) -> None:
        """Say what is decided before the end. 'verdict': the baseline has ended and its outcome needs no
        solo confirmation; only the verdict is stated then (causes wait for the probes). 'cause': every
        decisive toggle and combination has ended; the causes stand (a confirmation may still qualify
        them) and the fix costs follow."""
        s = self.session
        if self.pool.stop.is_set() or s.baseline is None:
            return
        if what == "verdict":
            if any(evidence.doubt(st) for st in s.baseline.stages):
                return      # a time-based outcome in doubt is stated once a solo rerun has confirmed it
            with self.pool.lock:
                self.settle(summary.verdict(s))
            s.verdict_at_s = round(time.monotonic() - self.t0, 1)
        else:
            self.conclude()
            s.cause_at_s = round(time.monotonic() - self.t0, 1)
        self.pool.save()
        if not self.pool.all_done() or fix_choice.doubtful_evidence(s):
            self.observer.on_verdict(s, what, self.claims())     # worth saying only when something still follows

    def finish(self) -> Session:
        self.session.diagnosis_s = round(time.monotonic() - self.t0, 1)
        if self.session.verdict.stage == "reference" and self.session.verdict.status == Status.NEEDS_GPU:
            return self.session      # the machine cannot judge it: nothing else to conclude
        self.conclude()
        return self.session

    def conclude(self) -> None:
        s = self.session
        with self.pool.lock:
            bisector.conclude(s)
            _state_notes(s)
            v = summary.verdict(s, interrupted=self.pool.stop.is_set())
            if self.pool.stop.is_set() and v.status != Status.INTERRUPTED:
                v.note = "the diagnosis was interrupted: conclusions rest only on the runs that finished"
            self.settle(v)
            busy = evidence.host_busy(s)
            # measured again on every conclusion, over every run so far: the latest measure is the one
            s.warnings = [w for w in s.warnings if w["kind"] != Warning_.HOST_BUSY]
            if busy:
                s.warn(Warning_.HOST_BUSY, busy)
            for r in s.runs:
                e = evidence.effective(s, r)
                if e.flaky:
                    s.warn(Warning_.FLAKY, e.note)
        self.pool.save()

    def salvaged(self) -> None:
        """Concluding failed (a bug of ours): no causes, the runs' verdict only."""
        s = self.session
        with self.pool.lock:
            s.causes, s.cleared, s.inconclusive, s.fix = [], [], [], None
            v = summary.verdict(s, interrupted=self.pool.stop.is_set())
            v.note = "diagnose failed while concluding (a bug in diagnose): no causes are stated"
            self.settle(v)

    def cannot_judge(self, need: int, have: int) -> None:
        """A multi-GPU problem on a machine with too few GPUs: the verdict, with no run."""
        self.settle(Verdict(Status.NEEDS_GPU, message=f"this problem needs {need} GPUs; this machine has {have}",
                            note="a multi-GPU problem runs one process per rank: run it on a machine with "
                                 f"{need} GPUs"), complete=True)

    def own_failures(self, errors: list[str]) -> None:
        """A bug of ours on a run: where it cut the submission's own run short, that run's pass is no pass (the
        verdict says inconclusive). A variant it cut short leaves the verdict as it stands."""
        s = self.session
        if not errors:
            return
        last = errors[0].strip().splitlines()[-1]
        s.notes.append(f"diagnose failed on {len(errors)} run(s) (a bug in diagnose): {last}")
        base = s.baseline
        if s.verdict.status == Status.OK and base is not None and base.outcome == Status.INCOMPLETE:
            self.settle(Verdict(Status.INCOMPLETE, message=f"inconclusive: diagnose failed on the submission's run "
                                                           f"{base.id} (a bug in diagnose): {last}", runs=[base.id]))

    def stopped(self, signum: int) -> None:
        """The verdict of a diagnosis a signal stopped, on what finished alone. The engine concluded as soon as the
        stop came, before the stage it stopped had come back: concluded again now, a stage that never ended can
        only leave it INTERRUPTED (a failure that did end stands)."""
        from diagnose.output.console import progress_text
        s, name = self.session, signal.Signals(signum).name
        v = summary.verdict(s, interrupted=True)
        if v.status in FAILURES or v.status == Status.NEEDS_GPU:
            v.note = "; ".join(filter(None, [v.note, f"the diagnosis was stopped by {name}: conclusions rest only on "
                                                     f"the runs that finished"]))
        else:
            v = Verdict(Status.INTERRUPTED, message=f"stopped by {name} before the diagnosis ended; "
                                                    f"{progress_text(s)}", runs=v.runs)
        self.settle(v, complete=False)

    def confirm(self, runs: list[Run]) -> None:
        """Rerun each doubtful run alone, up to the stage its doubt is about."""
        launched = []
        for r in runs:
            # up to the stage in doubt, or whose timing judgment waits for a measure alone on its GPU
            # the last such stage: a pass within the noise in one stage and at risk in the next both wait for it
            last = max((i for i, st in enumerate(r.stages) if evidence.doubt(st) or evidence.needs_solo(st)),
                       default=len(r.stages) - 1)
            stages = [st.name for st in r.stages[: last + 1] if st.status != Status.SKIPPED]
            if r.stages and r.stages[last].status in ENDS_RUN:
                # A failure in doubt: if it does not come back alone, the stages it cut off must run too,
                # or a pass of the first stages would stand for a pass of the whole run.
                planned = self.pool.planned(r)
                stages += planned[planned.index(stages[-1]) + 1:] if stages[-1] in planned else []
            c = self.pool.launch(Role.CONFIRM, r.probe, r.toggle, self.pool.sources[r.id],
                            tuple(k for k in r.switches if k == WARM), stages=stages, confirms=r.id)
            launched.append(c)
        self.pool.wait_for(lambda: all(self.pool.done(c) for c in launched))


def _state_notes(s: Session) -> None:
    """A conclusion whose runs differ in state kept between their processes says so: that state, not the
    toggle, may be what made the difference."""
    base = s.baseline
    if base is None:
        return
    for c in s.causes:
        notes = {carried.difference(base, r) for r in (s.run(i) for i in c.evidence) if r is not None and r is not base}
        c.state = "; ".join(sorted(n for n in notes if n))
    if s.fix and s.run(s.fix.run):
        s.fix.state = carried.difference(base, s.run(s.fix.run))
