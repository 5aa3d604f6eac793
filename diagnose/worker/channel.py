"""The event channel: one JSON object per line, appended with a single os.write so that a kill between
two events never leaves half a line, and the parent can rebuild the timeline from whatever arrived.

Event kinds (field `k`): env, begin, end, capture_begin, capture_end, compile, repeat, timing, check,
exception, lock_wait, stage_done. Every event carries `t`, wall-clock seconds (time.time()).
"""
from __future__ import annotations

import json
import os
import time


class Channel:
    def __init__(self, path: str):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.phases: list[str] = []   # open phases, innermost last
        self.failed: str | None = None  # innermost phase an exception left (phases close on the way out)

    def emit(self, kind: str, **fields) -> None:
        fields["k"] = kind
        fields.setdefault("t", time.time())
        os.write(self._fd, (json.dumps(fields, default=str) + "\n").encode())

    @property
    def phase(self) -> str | None:
        return self.phases[-1] if self.phases else None

    def begin(self, name: str, **fields) -> None:
        self.phases.append(name)
        self.emit("begin", name=name, **fields)

    def end(self, name: str, **fields) -> None:
        if self.phases and self.phases[-1] == name:
            self.phases.pop()
        if fields.get("ok") is False and self.failed is None:
            self.failed = name
        self.emit("end", name=name, **fields)
