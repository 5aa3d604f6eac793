"""Conclusions: the verdict, causes, cleared suspects and fix drawn from the runs so far (again after every
confirmation), the early verdict, and the solo confirmations of what a time-based conclusion rests on.
"""
from __future__ import annotations

import time

from diagnose.analysis import bisector, carried, evidence, fix_choice, summary
from diagnose.session import Role, Run, Session
from diagnose.status import ENDS_RUN, Status, Warning_
from probes.base import WARM


class Conclusions:
    """Conclusions and confirmations, for the Engine."""

    def _say_early(self, what: str) -> None:
        """Say what is decided before the end. 'verdict': the baseline has ended and its outcome needs no
        solo confirmation; only the verdict is stated then (causes wait for the probes). 'cause': every
        decisive toggle and combination has ended; the causes stand (a confirmation may still qualify
        them) and the fix costs follow."""
        s = self.session
        if self.stop.is_set() or s.baseline is None:
            return
        if what == "verdict":
            if any(evidence.doubt(st) for st in s.baseline.stages):
                return      # a time-based outcome in doubt is stated once a solo rerun has confirmed it
            with self.lock:
                s.verdict = summary.verdict(s)
            s.verdict_at_s = round(time.monotonic() - self._t0, 1)
        else:
            self._conclude()
            s.cause_at_s = round(time.monotonic() - self._t0, 1)
        self.save()
        if any(not st.done.is_set() for st in self._states.values()) or fix_choice.doubtful_evidence(s):
            self.on_verdict(s, what)     # worth saying only when something still follows

    def _finish(self) -> Session:
        self.session.diagnosis_s = round(time.monotonic() - self._t0, 1)
        if self.session.verdict.stage == "reference" and self.session.verdict.status == Status.NEEDS_GPU:
            return self.session      # the machine cannot judge it: nothing else to conclude
        self._conclude()
        return self.session

    def _conclude(self) -> None:
        s = self.session
        with self.lock:
            bisector.conclude(s)
            _state_notes(s)
            s.verdict = summary.verdict(s, interrupted=self.stop.is_set())
            if self.stop.is_set() and s.verdict.status != Status.INTERRUPTED:
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
        self.save()

    def _confirm(self, runs: list[Run]) -> None:
        """Rerun each doubtful run alone, up to the stage its doubt is about."""
        launched = []
        for r in runs:
            last = next((i for i, st in enumerate(r.stages) if evidence.doubt(st)), len(r.stages) - 1)
            stages = [st.name for st in r.stages[: last + 1] if st.status != Status.SKIPPED]
            if r.stages and r.stages[last].status in ENDS_RUN:
                # A failure in doubt: if it does not come back alone, the stages it cut off must run too,
                # or a pass of the first stages would stand for a pass of the whole run.
                planned = self._states[r.id].stages
                stages += planned[planned.index(stages[-1]) + 1:] if stages[-1] in planned else []
            c = self.launch(Role.CONFIRM, r.probe, r.toggle, self.sources[r.id],
                            tuple(k for k in r.switches if k == WARM), stages=stages, confirms=r.id)
            launched.append(c)
        self._wait_for(lambda: all(self._states[c.id].done.is_set() for c in launched))


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
