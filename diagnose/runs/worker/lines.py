"""Which of a variant's edited lines actually executed: the evidence that a toggle was exercised.

A toggle that the run never reached says nothing about its suspect, so the engine must know. On
Python 3.12+ this uses sys.monitoring LINE events on the submission's own code objects only; each
location is disabled after its first event, so the cost is a few calls in total. Older Pythons have
no sys.monitoring: there a trace function runs only in frames of the submission file and removes
itself once every watched line has run (its cost, in the submission's frames only, stops then).
"""
from __future__ import annotations

import sys
import threading
import types

from diagnose.runs.worker.channel import Channel

TOOL_ID = 3   # sys.monitoring ids 3 and 4 have no assigned owner


def executable_targets(code: types.CodeType, lines: set[int]) -> set[int]:
    """Map each watched line to the first line at or after it that has bytecode: an edited line that
    holds no instruction of its own (a blank, a continuation) counts when the statement after it runs."""
    have = set()
    stack = [code]
    while stack:
        c = stack.pop()
        have |= {ln for _, _, ln in c.co_lines() if ln}
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    out = set()
    for ln in lines:
        nxt = [h for h in have if h >= ln]
        if nxt:
            out.add(min(nxt))
    return out


class LineTracker:
    def __init__(self, ch: Channel, filename: str, lines: list[int]):
        self.ch, self.filename = ch, filename
        self.wanted = set(lines)
        self.targets: dict[int, set[int]] = {}   # executable line -> watched lines it stands for
        self.seen: set[int] = set()
        self._lock = threading.Lock()

    def instrument(self, code: types.CodeType) -> None:
        if not self.wanted:
            return
        for ln in self.wanted:
            t = executable_targets(code, {ln})
            for x in t:
                self.targets.setdefault(x, set()).add(ln)
        if not self.targets:
            return
        if sys.version_info >= (3, 12):
            self._monitor(code)
        else:
            self._trace()

    def _hit(self, line: int) -> bool:
        """Record a line; True once every target has run."""
        with self._lock:
            for ln in self.targets.get(line, ()):
                if ln not in self.seen:
                    self.seen.add(ln)
                    self.ch.emit("reached", line=ln)
            return self.seen >= set().union(*self.targets.values())

    # -- 3.12+: sys.monitoring on the submission's code objects ----------------------------------
    def _monitor(self, code: types.CodeType) -> None:
        mon = sys.monitoring
        try:
            mon.use_tool_id(TOOL_ID, "diagnose-lines")
        except ValueError:
            return
        targets = self.targets

        def on_line(c, line):
            if line in targets:
                self._hit(line)
            return mon.DISABLE
        watch_lines(TOOL_ID, code, targets, on_line)

    # -- older Pythons: a trace function confined to the submission's frames --------------------
    def _trace(self) -> None:
        filename, targets = self.filename, self.targets
        done = threading.Event()

        def local(frame, event, arg):
            if done.is_set():
                return None
            if event == "line" and frame.f_lineno in targets and self._hit(frame.f_lineno):
                done.set()
                sys.settrace(None)
                threading.settrace(None)
                return None
            return local

        def tracer(frame, event, arg):
            if done.is_set() or frame.f_code.co_filename != filename:
                return None
            return local(frame, event, arg)
        threading.settrace(tracer)
        sys.settrace(tracer)


def watch_lines(tool_id: int, code: types.CodeType, lines, on_line) -> None:
    """LINE events for `tool_id`, sent to `on_line`, in every code object under `code` (nested functions,
    comprehensions) that holds one of `lines`; the rest of the program stays unmonitored, at full speed."""
    mon = sys.monitoring
    mon.register_callback(tool_id, mon.events.LINE, on_line)
    stack = [code]
    while stack:
        c = stack.pop()
        if any(ln in lines for _, _, ln in c.co_lines()):
            mon.set_local_events(tool_id, c, mon.events.LINE)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
