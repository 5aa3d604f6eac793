"""A quiet machine for every timing section, kept by the parent.

When a run reaches a timing section it asks the parent over its event channel and blocks on its reply
pipe. Requests are granted one at a time, in arrival order. Granting one pauses every other run
registered on the same GPU (SIGSTOP to its process tree) until the section ends (SIGCONT): the timed
kernel then has the GPU and the CPUs to itself, and no run ever waits behind another's long compile.
(An earlier design let compiles hold the GPU "shared" and made timing wait for them: one 13 s
import-time compile then stalled every run queued behind the timing request.)

The parent, not the child, measures every wait and every pause, as intervals of wall-clock time. A
stage's deadline moves by exactly the time its child was kept waiting or paused, so the child cannot buy
itself time by claiming it waited; the stage's phase times are corrected the same way.

One run may be preferred (`prefer`): its requests are granted before those queued ahead of them. The engine
prefers the leading fix's run, whose stages are what the full report waits for; the others' sections still come
in their turn, one at a time.

A section may hold the machine for at most `max_section_s`: a timing loop that recompiles on every
call would otherwise keep every other run paused until its own deadline. Past the bound the others
resume, the section goes on but is recorded as "overrun" (its timing was not alone), and the next
request is served.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from diagnose.session import union_seconds


@dataclass
class _Owner:
    pause: Callable[[bool], None]            # pause(True) stops the owner's processes, pause(False) resumes
    intervals: list[list] = field(default_factory=list)   # [start, end|None, kind]: kind wait | pause
    paused_since: float | None = None


@dataclass
class _Request:
    owner: str
    grant: Callable[[], None]
    asked: float = field(default_factory=time.time)


class GpuArbiter:
    def __init__(self, name: str = "gpu0", max_section_s: float = 15.0):
        self.name = name
        self.max_section_s = max_section_s
        self._section = 0
        self._lock = threading.Lock()
        self._owners: dict[str, _Owner] = {}
        self._retired: dict[str, _Owner] = {}   # owners that ended: their intervals are still asked for
        self._queue: collections.deque[_Request] = collections.deque()
        self._holder: _Request | None = None
        self._preferred = ""                    # an owner prefix ("r2/") whose requests go first

    def prefer(self, run_id: str) -> None:
        with self._lock:
            self._preferred = f"{run_id}/"

    # -- membership --------------------------------------------------------------------------------
    def register(self, owner: str, pause: Callable[[bool], None]) -> None:
        with self._lock:
            self._owners[owner] = o = _Owner(pause)
            if self._holder is not None:     # a section is running: the newcomer waits until it ends
                self._pause(o)

    def forget(self, owner: str) -> None:
        """The owner's process is gone: drop whatever it held or asked for, and close its intervals."""
        with self._lock:
            self._queue = collections.deque(r for r in self._queue if r.owner != owner)
            o = self._owners.pop(owner, None)
            if o is not None:
                now = time.time()
                for iv in o.intervals:
                    if iv[1] is None:
                        iv[1] = now
                self._retired[owner] = o
            if self._holder is not None and self._holder.owner == owner:
                self._end_section()
        self._grant_next()

    # -- the protocol --------------------------------------------------------------------------------
    def acquire(self, owner: str, grant: Callable[[], None]) -> _Request:
        req = _Request(owner, grant)
        with self._lock:
            self._queue.append(req)
            o = self._owners.get(owner)
            if o is not None:
                o.intervals.append([req.asked, None, "wait"])
        self._grant_next()
        return req

    def release(self, owner: str) -> None:
        with self._lock:
            if self._holder is not None and self._holder.owner == owner:
                self._end_section()
            o = self._owners.get(owner)
            for iv in (o.intervals if o else []):
                if iv[2] == "overrun" and iv[1] is None:
                    iv[1] = time.time()
        self._grant_next()

    def _overrun(self, section: int) -> None:
        with self._lock:
            if self._holder is None or self._section != section:
                return
            me = self._owners.get(self._holder.owner)
            if me is not None:
                me.intervals.append([time.time(), None, "overrun"])
            self._end_section()
        self._grant_next()

    # -- what the parent learns ----------------------------------------------------------------------
    def intervals(self, owner: str, now: float | None = None) -> list[tuple[float, float, str]]:
        """(start, end, kind) of every wait and pause of `owner`; open ones end at `now`."""
        now = now or time.time()
        with self._lock:
            o = self._owners.get(owner) or self._retired.get(owner)
            return [(a, b if b is not None else now, k) for a, b, k in (o.intervals if o else [])]

    def held_up(self, owner: str, now: float | None = None) -> float:
        """Seconds `owner` was kept waiting or paused so far (overlaps counted once)."""
        return union_seconds([(a, b) for a, b, k in self.intervals(owner, now) if k != "overrun"])

    # -- internals -----------------------------------------------------------------------------------
    def _grant_next(self) -> None:
        with self._lock:
            if self._holder is not None or not self._queue:
                return
            first = next((r for r in self._queue if self._preferred and r.owner.startswith(self._preferred)), None)
            if first is not None:
                self._queue.remove(first)
            req = self._holder = first or self._queue.popleft()
            now = time.time()
            me = self._owners.get(req.owner)
            if me is not None:
                for iv in me.intervals:
                    if iv[2] == "wait" and iv[1] is None:
                        iv[1] = now
            for name, o in self._owners.items():
                if name != req.owner:
                    self._pause(o)
            self._section += 1
            timer = threading.Timer(self.max_section_s, self._overrun, args=(self._section,))
            timer.daemon = True
            timer.start()
        req.grant()

    def _pause(self, o: _Owner) -> None:
        if o.paused_since is None:
            o.paused_since = time.time()
            o.intervals.append([o.paused_since, None, "pause"])
            o.pause(True)

    def _end_section(self) -> None:
        self._holder = None
        now = time.time()
        for o in self._owners.values():
            if o.paused_since is not None:
                o.pause(False)
                o.paused_since = None
                for iv in o.intervals:
                    if iv[2] == "pause" and iv[1] is None:
                        iv[1] = now
