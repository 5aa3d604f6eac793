"""The event channel: JSON lines on a pipe the parent created and the child inherited by descriptor.

No path names it (nothing in argv or the environment points to a file), and the parent reads its end
without ever blocking. Each event is one os.write of at most PIPE_BUF bytes, which the kernel keeps
whole even when several threads or processes write at once; a larger event is cut into numbered
fragments the parent joins again. A kill between two writes therefore never leaves half an event.

Event kinds (field `k`): worker_start, env, begin, end, compile, compile_call,
repeat, timing, check, exception, worker_error, reached, samples, lock, stage_done, exit_clean, tamper,
needs_gpu, probe (a probe's own hook: worker/plugins.py). Every event carries `t` (time.time()) and `pid`.
"""
from __future__ import annotations

import json
import os
import threading
import time

PIPE_BUF = 4096
_FRAG_DATA = 3000      # characters of payload per fragment: with its envelope it stays under PIPE_BUF


class Channel:
    def __init__(self, fd: int):
        self._fd = fd
        self._lock = threading.Lock()
        self._seq = 0
        self.pid = os.getpid()
        self.phases: list[str] = []     # open phases, innermost last
        self.failed: str | None = None  # innermost phase an exception left (phases close on the way out)
        self.broken = False             # the descriptor went away (a submission closed it)
        self.watchers: list = []        # probes' hooks (worker/plugins.py): fn("begin"|"end", name, fields)

    def emit(self, kind: str, /, **fields) -> None:
        fields["k"] = kind
        fields.setdefault("t", time.time())
        fields["pid"] = os.getpid()
        line = json.dumps(fields, default=str)
        with self._lock:
            if len(line) + 1 <= PIPE_BUF:
                self._write(line)
                return
            self._seq += 1
            fid = f"{os.getpid()}-{self._seq}"
            parts = [line[i:i + _FRAG_DATA] for i in range(0, len(line), _FRAG_DATA)]
            for i, part in enumerate(parts):
                self._write(json.dumps({"k": "frag", "id": fid, "i": i, "n": len(parts), "d": part}))

    def _write(self, line: str) -> None:
        if self.broken:
            return
        try:
            os.write(self._fd, (line + "\n").encode())
        except OSError:
            self.broken = True   # EBADF / EPIPE: the parent decides from what it observes instead

    @property
    def phase(self) -> str | None:
        return self.phases[-1] if self.phases else None

    def begin(self, name: str, **fields) -> None:
        self.phases.append(name)
        self.emit("begin", name=name, **fields)
        self._tell("begin", name, fields)

    def end(self, name: str, **fields) -> None:
        if self.phases and self.phases[-1] == name:
            self.phases.pop()
        if fields.get("ok") is False and self.failed is None:
            self.failed = name
        self.emit("end", name=name, **fields)
        self._tell("end", name, fields)

    def _tell(self, what: str, name: str, fields: dict) -> None:
        for fn in self.watchers:
            try:
                fn(what, name, fields)
            except Exception:  # noqa: BLE001 - a probe's hook never changes the run it watches
                pass
