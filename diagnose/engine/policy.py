"""The scheduling policy: which queued job may start now. Apart from the pool that queues and runs the jobs
(scheduler.py), behind one small protocol, as pytest-xdist keeps its scheduling modes behind
`scheduler/protocol.py`: the pool asks `may_start` of the job at the head of its queue, and tells the policy what
started and ended; the policy never touches a thread or a future.

ReservePolicy is the one the engine uses. A solo job starts only when nothing else is running, and nothing else
starts while it runs: that is how a time-based conclusion is confirmed on a machine with no other run of this
diagnosis on it. Jobs of priority `background` or above never take the last `reserve` workers, so work that decides
the verdict, submitted later, does not wait behind them (nothing is preempted: a running job keeps its worker).
The engine widens the reserve while the causes are undecided and drops it once they stand (`set_reserve`).
"""
from __future__ import annotations

from typing import Protocol


class Policy(Protocol):
    reserve: int

    def may_start(self, priority: int, solo: bool) -> bool: ...

    def started(self, priority: int, solo: bool) -> None: ...

    def ended(self, priority: int, solo: bool) -> None: ...

    def set_reserve(self, n: int) -> None: ...


class ReservePolicy:
    def __init__(self, workers: int, background: int = 3, reserve: int = 2):
        self.workers, self.background = max(1, workers), background
        self.reserve = min(reserve, self.workers - 1)
        self._running = self._running_bg = 0
        self._solo = False

    def may_start(self, priority: int, solo: bool) -> bool:
        if self._solo or (solo and self._running):
            return False
        return not (priority >= self.background and self._running_bg >= self.workers - self.reserve)

    def started(self, priority: int, solo: bool) -> None:
        self._running += 1
        self._running_bg += priority >= self.background
        self._solo = solo

    def ended(self, priority: int, solo: bool) -> None:
        self._running -= 1
        self._running_bg -= priority >= self.background
        if solo:
            self._solo = False

    def set_reserve(self, n: int) -> None:
        self.reserve = max(0, min(n, self.workers - 1))
