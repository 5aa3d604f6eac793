"""In a tuning run: what each search's frame, and each submission frame above it, returned, with the key of the
arguments it was called with (key.py). The search's choice is often what its function returns, wherever (or
whether) the code then keeps it: an lru_cache under a staticmethod, a closure's dict, a list. Pinning that
function's return per key covers all of them at once (pin.py).

A frame is armed once it holds a search: its f_trace gets the return event, as a debugger's breakpoint does, and the
thread's trace function (a no-op for every other frame) is set only while an armed frame is alive. Only in a tuning
run, which is never timed.
"""
from __future__ import annotations

import sys
import threading

from probes.search import objects
from probes.search.key import key_function, parameters

CAP = 2000          # returns recorded in one tuning run


class Returns:
    def __init__(self, record):
        self.record = record            # record(frame, key, value): called at the armed frame's return
        self.key = key_function()
        self.armed: dict[int, tuple] = {}      # id(frame) -> (key, thread ident)
        self.lock = threading.Lock()
        self.count = 0

    def arm(self, frames) -> None:
        here, f = set(), sys._getframe()
        while f is not None:        # a frame of another thread (a search's waiting caller) gets no return event
            here.add(id(f))
            f = f.f_back
        for fr in frames:
            name = fr.f_code.co_name
            if id(fr) not in here or id(fr) in self.armed or name.startswith("<") or name == "custom_kernel" or \
                    self.count >= CAP:
                continue
            try:
                key = self.key(*(fr.f_locals.get(p) for p in parameters(fr.f_code)))
            except Exception:  # noqa: BLE001 - a value whose shape cannot be read: the frame is not pinned
                continue
            with self.lock:
                self.armed[id(fr)] = (key, threading.get_ident())
            fr.f_trace_lines = False
            fr.f_trace = self._local
        if self.armed and sys.gettrace() is None:
            sys.settrace(_untraced)

    def _local(self, frame, event, arg):
        if event == "return":
            with self.lock:
                got = self.armed.pop(id(frame), None)
                self.count += 1
                last = not any(t == threading.get_ident() for _, t in self.armed.values())
            if got is not None:
                try:
                    self.record(frame, got[0], arg)
                except Exception:  # noqa: BLE001 - the record never changes what the submission returns
                    pass
            if last and sys.gettrace() is _untraced:
                sys.settrace(None)
        return self._local


def _untraced(frame, event, arg):
    """The thread's trace function while a frame is armed: no other frame is traced."""
    return None


def judged(returned: list[dict], found: list[dict], linked) -> list[dict]:
    """Each return of a phase with whether it is the choice (`linked`): what the search's own function returned
    after timing its candidates (anything but None or a flag: a tuple of two loop variables, an index, a plan
    object), the same value handed up by a caller, or a value built of what the search held while timing."""
    searching = {(s["func"], s["def_line"]) for s in found}

    def made(r) -> bool:
        v = r.get("value")
        return v is not None and not isinstance(v, bool) and (r["func"], r["def_line"]) in searching
    own = {r["text"] for r in returned if made(r)}
    out = []
    for r in returned:
        v = r.get("value")
        ok = v is not None and (made(r) or r["text"] in own or objects.made_of(linked, v))
        out.append({**{k: x for k, x in r.items() if k != "value"}, "linked": ok})
    return out
