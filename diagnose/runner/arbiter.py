"""GPU arbitration between overlapping runs: a first-come, first-served reader-writer lock per GPU,
kept in the parent.

A child asks for the GPU over its event channel ("shared" for compiles, checks and first calls;
"exclusive" for a timing section) and blocks until the parent answers on its reply pipe. Requests are
granted strictly in arrival order: a shared request that arrives after a waiting exclusive one waits
behind it, so a timing section never starves behind an endless stream of shared holders (a plain
flock gives no such promise, and under load it did starve).

The parent, not the child, measures every wait, so a stage's deadline is extended by exactly the time
its child spent queued, and a child cannot buy itself time by claiming it waited. It also measures, per
owner, how long it held the GPU while another owner held it too: evidence that a phase shared the GPU.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

SHARED, EXCLUSIVE = "shared", "exclusive"


@dataclass
class _Request:
    owner: str
    mode: str
    grant: Callable[[], None]
    asked: float = field(default_factory=time.time)
    granted: float | None = None


@dataclass
class OwnerStats:
    waits: list[dict] = field(default_factory=list)   # {start, seconds, mode}
    pending_since: float | None = None                # asked and not yet granted
    shared_s: float = 0.0                             # held while another owner held too


class GpuArbiter:
    def __init__(self, name: str = "gpu0"):
        self.name = name
        self._lock = threading.Lock()
        self._queue: collections.deque[_Request] = collections.deque()
        self._held: list[_Request] = []
        self._stats: dict[str, OwnerStats] = {}
        self._last = time.time()

    # -- the protocol ------------------------------------------------------------------------------
    def acquire(self, owner: str, mode: str, grant: Callable[[], None]) -> _Request:
        """Queue a request; `grant()` is called (maybe from another thread) once it is granted."""
        if mode not in (SHARED, EXCLUSIVE):
            raise ValueError(f"lock mode {mode!r}")
        req = _Request(owner, mode, grant)
        with self._lock:
            self._account()
            self._stats.setdefault(owner, OwnerStats()).pending_since = req.asked
            self._queue.append(req)
            ready = self._pump()
        for r in ready:
            r.grant()
        return req

    def release(self, req: _Request) -> None:
        with self._lock:
            self._account()
            if req in self._held:
                self._held.remove(req)
            elif req in self._queue:     # given up before it was granted
                self._queue.remove(req)
                self._stats[req.owner].pending_since = None
            ready = self._pump()
        for r in ready:
            r.grant()

    def forget(self, owner: str) -> None:
        """The owner's process is gone: drop whatever it held or asked for."""
        with self._lock:
            self._account()
            self._held = [r for r in self._held if r.owner != owner]
            self._queue = collections.deque(r for r in self._queue if r.owner != owner)
            if owner in self._stats:
                self._stats[owner].pending_since = None
            ready = self._pump()
        for r in ready:
            r.grant()

    # -- what the parent learns ----------------------------------------------------------------------
    def waited(self, owner: str, now: float | None = None) -> float:
        """Seconds `owner` has spent queued so far, the current wait included."""
        now = now or time.time()
        with self._lock:
            st = self._stats.get(owner)
            if st is None:
                return 0.0
            return sum(w["seconds"] for w in st.waits) + (now - st.pending_since if st.pending_since else 0.0)

    def stats(self, owner: str) -> OwnerStats:
        with self._lock:
            self._account()
            return self._stats.get(owner, OwnerStats())

    # -- internals (under self._lock) ----------------------------------------------------------------
    def _pump(self) -> list[_Request]:
        ready = []
        while self._queue:
            head = self._queue[0]
            if head.mode == EXCLUSIVE:
                if self._held:
                    break
            elif any(r.mode == EXCLUSIVE for r in self._held):
                break
            self._queue.popleft()
            head.granted = time.time()
            st = self._stats[head.owner]
            st.pending_since = None
            st.waits.append({"start": head.asked, "seconds": round(head.granted - head.asked, 4), "mode": head.mode})
            self._held.append(head)
            ready.append(head)
            if head.mode == EXCLUSIVE:
                break
        return ready

    def _account(self) -> None:
        """Charge the time since the last change to every holder that shared the GPU with another."""
        now = time.time()
        owners = {r.owner for r in self._held}
        if len(owners) > 1:
            for o in owners:
                self._stats[o].shared_s += now - self._last
        self._last = now
