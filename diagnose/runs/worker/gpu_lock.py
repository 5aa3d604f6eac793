"""The child's side of timing arbitration (the parent's side is runner/arbiter.py).

A timing section asks the parent over the event channel, then blocks on the reply pipe until the parent
grants it, having paused every other run. Holds nest: only the outermost one asks. The parent times the
wait itself; the child only uses its own measure to move its watchdog.
"""
from __future__ import annotations

import contextlib
import os
import time

from diagnose.runs.worker.channel import Channel


class GpuLock:
    def __init__(self, ch: Channel, reply_fd: int | None, on_wait=None):
        self.ch, self.reply_fd = ch, reply_fd
        self.on_wait = on_wait or (lambda s: None)
        self.depth, self.n, self.waited_s = 0, 0, 0.0
        self._buf = b""

    @property
    def enabled(self) -> bool:
        return self.reply_fd is not None

    @contextlib.contextmanager
    def exclusive(self):
        if not self.enabled or self.depth or os.getpid() != self.ch.pid:
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        self.n += 1
        lock_id = self.n
        t0 = time.time()
        self.ch.emit("lock", op="acquire", mode="exclusive", id=lock_id)
        self._wait_for(lock_id)
        waited = time.time() - t0
        self.waited_s += waited
        self.on_wait(waited)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.ch.emit("lock", op="release", id=lock_id)

    def _wait_for(self, lock_id: int) -> None:
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if line.strip() == str(lock_id).encode():
                    return
            try:
                chunk = os.read(self.reply_fd, 64)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:      # the parent is gone: the watchdog ends this process
                self.reply_fd = None
                return
            self._buf += chunk
