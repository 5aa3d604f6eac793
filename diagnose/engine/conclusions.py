"""Conclusions: the verdict, causes, cleared suspects and fix drawn from the runs so far (again after every
confirmation), the early verdict, and the solo confirmations of what a time-based conclusion rests on.
"""
from __future__ import annotations

import time

from diagnose.analysis import bisector, carried, evidence, fix_choice, summary
from diagnose.engine.runs import RunPool
from diagnose.session import Role, Run, Session
from diagnose.status import ENDS_RUN, Status, Warning_
from probes.base import WARM


class Conclusions:
    """The verdict, causes and fix drawn from the pool's runs, and the solo confirmations they ask for.
    `on_verdict(session, what)` hears the verdict, then the causes, once each is decided before the end."""

    def __init__(self, pool: RunPool, on_verdict=None):
        self.pool, self.session, self.settings = pool, pool.session, pool.settings
        self.on_verdict = on_verdict or (lambda s, what: None)
        self.t0 = time.monotonic()

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
                s.verdict = summary.verdict(s)
            s.verdict_at_s = round(time.monotonic() - self.t0, 1)
        else:
            self.conclude()
            s.cause_at_s = round(time.monotonic() - self.t0, 1)
        self.pool.save()
        if not self.pool.all_done() or fix_choice.doubtful_evidence(s):
            self.on_verdict(s, what)     # worth saying only when something still follows

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
            s.verdict = summary.verdict(s, interrupted=self.pool.stop.is_set())
            if self.pool.stop.is_set() and s.verdict.status != Status.INTERRUPTED:
                s.verdict.note = "the diagnosis was interrupted: conclusions rest only on the runs that finished"
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
