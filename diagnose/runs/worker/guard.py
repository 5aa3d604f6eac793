"""What judges the submission, and proof that it is still what judges it.

Before the submission is imported the worker notes the identity of every object a verdict rests on: the
clocks the timing reads, torch's CUDA events and synchronize, and the reference's generate_input and
check_implementation. After the import, after each shape's first call (evaluator mode) and at the end of
the stage it looks again. Anything replaced is reported as a `tamper` event, with the replacement's
source location when it has one; the parent turns that into the status `tampered`.

Looking is a handful of attribute reads, never done inside a timing section.
"""
from __future__ import annotations

import linecache
import os
import sys
import time


def _location(obj) -> tuple[str, int] | None:
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)
    if code is None:
        return None
    return code.co_filename, code.co_firstlineno


class Guard:
    def __init__(self, ch):
        self.ch = ch
        self.watched: dict[str, tuple] = {}    # label -> (getter, original)
        self.reported: set[str] = set()

    def watch(self, label: str, getter) -> None:
        try:
            self.watched[label] = (getter, getter())
        except Exception:  # noqa: BLE001 - what does not exist cannot be replaced
            pass

    def watch_clocks(self, torch) -> None:
        for name in ("perf_counter", "perf_counter_ns"):
            self.watch(f"time.{name}", lambda n=name: getattr(time, n))
        cuda = getattr(torch, "cuda", None)
        if cuda is None:
            return
        self.watch("torch.cuda.synchronize", lambda: cuda.synchronize)
        self.watch("torch.cuda.Event", lambda: cuda.Event)
        for name in ("record", "elapsed_time", "synchronize"):
            self.watch(f"torch.cuda.Event.{name}", lambda n=name: getattr(cuda.Event, n))

    def watch_module(self, name: str, attrs=("generate_input", "check_implementation")) -> None:
        """The module as sys.modules holds it now, and its judging functions: replacing either counts."""
        if name not in sys.modules:
            return
        mod = sys.modules[name]
        self.watch(f"sys.modules[{name!r}]", lambda: sys.modules.get(name))
        for attr in attrs:
            if hasattr(mod, attr):
                self.watch(f"{name}.{attr}", lambda a=attr: getattr(sys.modules.get(name), a, None))

    def verify(self, when: str) -> list[str]:
        found = []
        for label, (getter, original) in self.watched.items():
            if label in self.reported:
                continue
            try:
                now = getter()
            except Exception:  # noqa: BLE001 - a getter that now fails: the object was removed
                now = None
            if now is original:
                continue
            self.reported.add(label)
            loc = _location(now)
            what = f"{label} was replaced" + (f" by {os.path.basename(loc[0])}:{loc[1]}" if loc else "") + \
                f" ({when})"
            fields = {"what": what}
            if loc:
                fields.update(file=loc[0], line=loc[1], code=linecache.getline(loc[0], loc[1]).strip()[:300])
            self.ch.emit("tamper", **fields)
            found.append(what)
        return found
