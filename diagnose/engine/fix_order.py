"""Fix costing in the order of the choice. Every variant that got past the baseline's failure may be the fix, and
each runs its stages up to its steady state (the benchmark: the fix is chosen by it, and each fix's cost is it).
The stages after that only show that the chosen one fits their budgets, so they run for the leading variant
first (analysis/causes/fix_choice.contenders: the one the choice takes, once each has its steady state), at the
priority of deciding work; an alternative's are parked, and run only if the choice reaches it (the variants
before it failed a stage). On Round 9 four alternatives' leaderboards ran beside the chosen fix's, each pausing
its stage for their timing sections. What the choice never reached is dropped at the end, its stages said not
run (fix_choice.NOT_NEEDED), and its steady state still stands as that alternative's cost.
"""
from __future__ import annotations

import threading

from diagnose.analysis.causes import fix_choice
from diagnose.facts.measures import STEADY_STAGE
from diagnose.runs.settings import Settings
from diagnose.session import Role, Run, Session, StageResult
from diagnose.status import Status


class FixOrder:
    """The parked stages of the alternatives, and which variant leads the choice."""

    def __init__(self, session: Session, settings: Settings):
        self.session, self.settings = session, settings
        self._parked: dict[str, tuple] = {}      # run id -> (its RunState, the job of its next stage)
        self._lock = threading.Lock()
        self.active = False      # the diagnosis turns it on; bisect's edit search waits on every run it starts

    def _order(self) -> list[Run] | None:
        base = self.session.baseline
        return fix_choice.contenders(self.session, base) if base is not None else None

    def leads(self, run: Run) -> bool:
        order = self._order()
        return bool(order) and order[0] is run

    def parks(self, run: Run, stage: str, full: bool) -> bool:
        """Is `stage` one that only verifies an alternative the choice has not reached? Past both the steady state
        and the baseline's failure, of a variant that may be the fix and does not lead."""
        s, base = self.settings, self.session.baseline
        if not self.active:
            return False
        failed = base.failed_stage if base is not None else None
        if failed is None or not {STEADY_STAGE, stage, failed.name} <= set(s.stages):
            return False
        if run.role != Role.SINGLE and not (run.role == Role.COMBINATION and full):
            return False
        if s.index(stage) <= max(s.index(STEADY_STAGE), s.index(failed.name)):
            return False
        order = self._order()
        return bool(order) and order[0] is not run and any(r is run for r in order)

    def park(self, st, job) -> None:
        with self._lock:
            self._parked[st.run.id] = (st, job)

    def holds(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._parked

    def due(self) -> list[tuple]:
        """The parked stages the choice now reaches: the leader's, or all where no order can be told."""
        with self._lock:
            if not self._parked:
                return []
        order = self._order()
        with self._lock:
            ids = [i for i in self._parked if order is None or (order and order[0].id == i)]
            return [self._parked.pop(i) for i in ids]

    def drop(self, why: str) -> list:
        """Every parked run, its parked stages and those after them ended as not run (`why`, said beside its outcome
        too: "ok" there covers only the stages it ran). Their states, for the pool to end."""
        with self._lock:
            out, self._parked = list(self._parked.values()), {}
        for st, job in out:
            left = st.stages[st.stages.index(job.stages[0]):]
            st.run.stages += [StageResult(name=n, status=Status.SKIPPED, budget_s=self.settings.budgets.get(n, 0.0),
                                          message=why) for n in left]
            st.run.settle()
            st.run.note = st.run.note or f"{', '.join(left)} {why}"
            st.next = len(st.stages)
        return [st for st, _ in out]
