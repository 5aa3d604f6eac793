"""Parse what arrives on a child's event pipe: whole lines, joined fragments, and a shape check.

The child runs untrusted code in its own process, so its events are claims. Each one must be a JSON
object of a known kind with fields of the right types, and the kinds that decide a verdict (the stage's
end, a clean exit, the worker's own failure) count only from the worker's own process. Anything else is
kept as an anomaly, the evidence that something wrote to the tool's channel, and is never acted on.
Nothing a child writes can make this raise.
"""
from __future__ import annotations

import json

from diagnose.runs.protocol import EVENTS as SHAPES, NUM, WORKER_ONLY

STATUSES = {"ok", "wrong"}
MAX_EVENTS = 50_000
MAX_LINE = 256 * 1024
MAX_ANOMALIES = 20


class EventParser:
    def __init__(self, worker_pid: int):
        self.worker_pid = worker_pid
        self.events: list[dict] = []
        self.anomalies: list[str] = []
        self._partial = b""
        self._frags: dict[str, list] = {}
        self._dropped = 0

    def anomaly(self, what: str) -> None:
        if len(self.anomalies) < MAX_ANOMALIES:
            self.anomalies.append(what[:300])
        elif len(self.anomalies) == MAX_ANOMALIES:
            self.anomalies.append("(more anomalies not kept)")

    def feed(self, data: bytes) -> list[dict]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            self.anomaly(f"a line of over {MAX_LINE} bytes on the event channel")
            self._partial = b""
        new = []
        for raw in lines:
            ev = self._parse(raw)
            if ev is not None:
                new.append(ev)
        if len(self.events) + len(new) > MAX_EVENTS:
            keep = max(0, MAX_EVENTS - len(self.events))
            self._dropped += len(new) - keep
            new = new[:keep]
            if self._dropped and not any("events dropped" in a for a in self.anomalies):
                self.anomaly("more than 50,000 events: the rest were dropped")
        self.events += new
        return new

    def _parse(self, raw: bytes) -> dict | None:
        try:
            ev = json.loads(raw)
        except (ValueError, RecursionError):
            if raw.strip():
                self.anomaly(f"a line that is not JSON: {raw[:80]!r}")
            return None
        if not isinstance(ev, dict):
            self.anomaly(f"an event that is not an object: {str(ev)[:80]}")
            return None
        if ev.get("k") == "frag":
            return self._fragment(ev)
        return self._check(ev)

    def _fragment(self, ev: dict) -> dict | None:
        fid, i, n, d = ev.get("id"), ev.get("i"), ev.get("n"), ev.get("d")
        if not (isinstance(fid, str) and isinstance(i, int) and isinstance(n, int) and isinstance(d, str)
                and 0 <= i < n <= 1000):
            self.anomaly("a malformed fragment")
            return None
        parts = self._frags.setdefault(fid, [None] * n)
        if len(parts) != n:
            self.anomaly("fragments that disagree on their count")
            self._frags.pop(fid, None)
            return None
        parts[i] = d
        if any(p is None for p in parts):
            if len(self._frags) > 64:     # abandoned fragments: drop the oldest
                self._frags.pop(next(iter(self._frags)))
            return None
        del self._frags[fid]
        return self._parse("".join(parts).encode())

    def _check(self, ev: dict) -> dict | None:
        kind = ev.get("k")
        shape = SHAPES.get(kind) if isinstance(kind, str) else None
        if shape is None:
            self.anomaly(f"an event of unknown kind {str(kind)[:40]!r}")
            return None
        if not isinstance(ev.get("t"), NUM) or not isinstance(ev.get("pid"), int):
            self.anomaly(f"a {kind} event without a time or a pid")
            return None
        for name, types in shape.items():
            if not isinstance(ev.get(name), types) or isinstance(ev.get(name), bool) and bool not in types:
                self.anomaly(f"a {kind} event whose {name} is {type(ev.get(name)).__name__}")
                return None
        if kind in WORKER_ONLY and ev["pid"] != self.worker_pid:
            self.anomaly(f"a {kind} event from pid {ev['pid']}, not the worker (pid {self.worker_pid})")
            return None
        if kind == "stage_done" and ev["status"] not in STATUSES:
            self.anomaly(f"a stage_done with status {ev['status'][:20]!r}")
            return None
        if kind == "lock" and (ev["op"] not in ("acquire", "release")
                               or ev["op"] == "acquire" and ev.get("mode") not in ("shared", "exclusive")):
            self.anomaly("a malformed GPU lock request")
            return None
        return ev
