"""A priority pool of worker threads: the queue and the threads, with which job may start next left to a policy
(policy.py: solo jobs, the reserve kept for deciding work).

Jobs run lowest priority number first (ties in submission order); the job at the head of the queue starts when
the policy says it may. Once `stop` is set, queued jobs are dropped (their futures are cancelled) and running ones
are left to notice it.
"""
from __future__ import annotations

import heapq
import itertools
import threading
from concurrent.futures import Future
from typing import Callable

from diagnose.engine.policy import Policy, ReservePolicy


class Scheduler:
    def __init__(self, workers: int, stop: threading.Event, background: int = 3, reserve: int = 2,
                 policy: Policy | None = None):
        self.stop = stop
        self.policy: Policy = policy or ReservePolicy(workers, background, reserve)
        self._cv = threading.Condition()
        self._heap: list = []
        self._seq = itertools.count()
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

    @property
    def reserve(self) -> int:
        return self.policy.reserve

    def set_reserve(self, n: int) -> None:
        with self._cv:
            self.policy.set_reserve(n)
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
                if self._heap and self.policy.may_start(self._heap[0][0], self._heap[0][2]):
                    item = heapq.heappop(self._heap)
                    self.policy.started(item[0], item[2])
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
                self.policy.ended(prio, solo)
                self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        for t in self._threads:
            t.join()
