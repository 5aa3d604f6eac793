"""A priority pool of worker threads, with solo jobs.

Jobs run lowest priority number first (ties in submission order). A solo job starts only when nothing
else is running, and nothing else starts while it runs: that is how a time-based conclusion is
confirmed on a machine with no other run of this diagnosis on it. Jobs of priority `background` or
above never take the last `reserve` workers, so work that decides the verdict, submitted later, does
not wait behind them (nothing is preempted: a running job keeps its worker). The engine widens the
reserve while the causes are undecided and drops it once they stand (`set_reserve`). Once `stop` is set,
queued jobs are dropped (their futures are cancelled) and running ones are left to notice it.
"""
from __future__ import annotations

import heapq
import itertools
import threading
from concurrent.futures import Future
from typing import Callable


class Scheduler:
    def __init__(self, workers: int, stop: threading.Event, background: int = 3, reserve: int = 2):
        self.stop = stop
        self.workers, self.background = max(1, workers), background
        self.reserve = min(reserve, self.workers - 1)
        self._running_bg = 0
        self._cv = threading.Condition()
        self._heap: list = []
        self._seq = itertools.count()
        self._running = 0
        self._solo = False
        self._closed = False
        self._threads = [threading.Thread(target=self._work, daemon=True, name=f"diagnose-run-{i}")
                         for i in range(max(1, workers))]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], object], priority: int, solo: bool = False) -> Future:
        fut: Future = Future()
        with self._cv:
            heapq.heappush(self._heap, (priority, next(self._seq), solo, fn, fut))
            self._cv.notify_all()
        return fut

    def set_reserve(self, n: int) -> None:
        with self._cv:
            self.reserve = max(0, min(n, self.workers - 1))
            self._cv.notify_all()

    def _next(self):
        with self._cv:
            while True:
                if self._closed and not self._heap:
                    return None
                if self.stop.is_set():
                    while self._heap:
                        heapq.heappop(self._heap)[4].cancel()
                    if self._closed:
                        return None
                if self._heap and not self._solo:
                    prio, _, solo, _, _ = self._heap[0]
                    bg_full = prio >= self.background and self._running_bg >= self.workers - self.reserve
                    if (not solo or self._running == 0) and not bg_full:
                        item = heapq.heappop(self._heap)
                        self._running += 1
                        self._running_bg += prio >= self.background
                        self._solo = solo
                        return item
                self._cv.wait(0.2)

    def _work(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            prio, _, solo, fn, fut = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the future
                    fut.set_exception(e)
            with self._cv:
                self._running -= 1
                self._running_bg -= prio >= self.background
                if solo:
                    self._solo = False
                self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        for t in self._threads:
            t.join()
