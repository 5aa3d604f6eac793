"""The search probe's worker-side records (hook.py installs them): what a first call of a shape (and each shape of
a tuning run) decided, from what it did, however the code is spelled.

Two records, linked by the phase they fall in:

- a search: the submission's frames that read a clock between candidates. A clock read is a call, made
  directly from the submission's code, of time.perf_counter / monotonic / time (each counts half a candidate:
  a read before and one after), a CUDA event's elapsed_time, or triton.testing.do_bench (one each). The frame
  that the reads share as one living call, the deepest one holding MIN_CANDIDATES or more, is the search: a
  loop there, a min(...) over candidates, a comprehension of timings. Its call path from custom_kernel, its
  candidates and its seconds are sent; once it crosses the threshold it is sent at once too, so a first call
  the deadline cuts off still names it.
- what the phase left behind in the submission's module: keys added to module-level dicts, to the dicts of
  its classes and of module-level instances of them; functools caches that grew; attributes bound again.
"""
from __future__ import annotations

import ast
import threading
import time

from probes.search import objects
from probes.search.threads import submission_frames, waiting_chain

MIN_CANDIDATES = 3
CLOCKS = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time",
          "process_time_ns", "thread_time", "thread_time_ns")
# clocks that time a whole candidate in one call (a read before and after inside them)
WHOLE = ("do_bench", "cuda.Event.elapsed_time", "timeit.timeit", "timeit.repeat", "timeit.Timer.timeit",
         "timeit.Timer.repeat", "timeit.Timer.autorange", "torch.utils.benchmark.Timer.timeit",
         "torch.utils.benchmark.Timer.blocked_autorange", "torch.utils.benchmark.Timer.adaptive_autorange",
         "triton.testing.do_bench", "triton.testing.do_bench_cudagraph")
VALUES_CAP = 64             # values kept per name of a search frame's call (their reprs)
VALUE_TEXT = 200
KEYS_SHOWN = 8
TEXT_CAP = 400_000          # characters of one kept value's text (the file's 1 MB cap is checked on the edit)


def literal_text(value) -> tuple[str | None, str | None]:
    """(source text that reads back equal, None) or (None, why not)."""
    plain = _plain(value)
    try:
        text = repr(plain)
        if ast.literal_eval(text) == plain:
            return (text, None) if len(text) <= TEXT_CAP else (None, f"{len(text):,} characters, too large to pin")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    made = objects.text(value)          # objects of the submission's own classes among plain values
    if made is not None:
        return (made, None) if len(made) <= TEXT_CAP else (None, f"{len(made):,} characters, too large to pin")
    kinds = sorted({type(v).__name__ for v in _leaves(value)})
    return None, f"it holds {', '.join(kinds[:4]) or type(value).__name__}, which no constant in a source file can"


def dict_fields(name: str, value) -> dict:
    """What a dict the scan found a search keeping its result in held at a tuning run's end (the plan names it), as
    source text where that text reads back equal: {name, text, entries, bytes} or {name, error}."""
    if not isinstance(value, dict):
        return {"name": name, "error": f"`{name}` is a {type(value).__name__} at the end, not a dict"}
    plain = _plain(dict(value))
    text = repr(plain)
    try:
        same = ast.literal_eval(text) == plain
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        kinds = sorted({type(v).__name__ for v in value.values()} | {type(k).__name__ for k in value})
        return {"name": name, "entries": len(value), "error": f"its keys and values ({', '.join(kinds)}) cannot be "
                                                                f"written as constants"}
    return {"name": name, "text": text, "entries": len(value), "bytes": len(text.encode())}


def _plain(v):
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return v


PLAIN_CAP = 2000           # elements: a larger value is fingerprinted by identity, never walked at every phase


def plain(v) -> bool:
    """Made only of what a literal can hold (numbers, strings, tuples, lists, dicts of them): a choice, not an
    input or a kernel parked in the module."""
    if isinstance(v, (tuple, list, dict)) and len(v) > PLAIN_CAP:
        return False
    return next(_leaves(v), None) is None


def _leaves(v, depth=0):
    if depth > 3:
        yield v          # too deep to tell: not plain
        return
    if isinstance(v, (tuple, list)):
        for x in v:
            yield from _leaves(x, depth + 1)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(k, depth + 1)
            yield from _leaves(x, depth + 1)
    elif not isinstance(v, (int, float, str, bool, bytes, type(None))):
        yield v


class Search:
    """One phase's clock reads, grouped by the submission frames they were made under."""

    def __init__(self, api, phase: str, on_search=None):
        self.api, self.phase = api, phase
        self.on_search = on_search          # fn(frames): the frames of a search, once it crosses the threshold
        self.recs: dict[int, dict] = {}
        self.done: list[dict] = []
        self.prev: dict[int, list] = {}     # thread ident -> the chain of its last read (a search may run in any)
        self.sent: set = set()
        self.waited: dict[tuple, int] = {}  # (function, line) -> how many of its calls were waits (at most 8 places)
        self.thread = threading.get_ident()     # the phase's own thread: it waits for candidates timed in others
        self.held: dict[int, object] = {}       # its frames on other threads' chains, held so their ids stay theirs
        self.waiter: dict[int, list] = {}       # a worker process's pid -> where the phase's thread last waited for it

    def read(self, kind: str, weight: float, first, thread, worked: bool | None = None, chain=None) -> bool:
        """Record a read; `worked`: whether work ran on this thread since its last read (between.py; None where
        nobody watched); `chain`: another process's read (processes.py), its frames as sent, `thread` (pid, thread).
        True while the reading frame is undecided (a wait, or a loop with work between its reads)."""
        chain = submission_frames(first, self.api.submission_dir) if chain is None else chain
        if not chain:
            return False
        if thread != self.thread:       # a worker's candidate: its chain starts where the phase's thread waits
            waiting = waiting_chain(self.thread, self.api.submission_dir)
            if isinstance(thread, tuple):   # a process's read comes through a pipe, maybe after its caller moved on
                waiting = self.waiter[thread[0]] = waiting or self.waiter.get(thread[0], [])
            for fr in waiting:
                self.held.setdefault(id(fr), fr)
            chain = waiting + chain
        recs = self._recs(chain, thread, time.perf_counter())
        self._count(recs, chain, kind, weight, worked)
        leaf = self._leaf(recs[-1])
        if leaf is not None and id(leaf) not in self.sent:
            self.sent.add(id(leaf))
            self.api.emit(what="searching", phase=self.phase, search=self.describe(leaf))
            if self.on_search is not None:
                self.on_search(chain[:leaf["depth"] + 1])
        own = recs[-1]
        return not (own["spin"] or own["works"] or own["children"] or any(k in WHOLE for k in own["kinds"]))

    def _recs(self, chain: list, thread: int, now: float) -> list[dict]:
        """The record of each frame of the chain: the same living call as at this thread's last read, or a new one."""
        prev, same, parent, out = self.prev.get(thread, []), True, None, []
        seen = _values(chain)
        for i, fr in enumerate(chain):
            same = same and i < len(prev) and prev[i] is fr
            rec = self.recs.get(id(fr)) if same or self.held.get(id(fr)) is fr else None
            if rec is None:
                old = self.recs.get(id(fr))
                if old is not None and self.timed(old):
                    self.done.append(old)
                rec = self.recs[id(fr)] = {
                    "func": fr.f_code.co_name, "file": fr.f_code.co_filename, "def_line": fr.f_code.co_firstlineno,
                    "depth": i, "weight": 0.0, "lines": {}, "kinds": [], "t0": now, "parent": parent, "children": 0,
                    "path": [{"func": c.f_code.co_name, "line": c.f_lineno} for c in chain[:i]], "values": {},
                    "up": 0.0, "spin": False, "works": False, "gave": [], "row": 0, "last": None}
                if parent is not None:
                    parent["children"] += 1
            rec["t1"] = now
            for name, text in seen[i].items():
                got = rec["values"].setdefault(name, set()) if len(rec["values"]) < VALUES_CAP else \
                    rec["values"].get(name)
                if got is not None and len(got) < VALUES_CAP:
                    got.add(text)
            out.append(rec)
            parent = rec
        self.prev[thread] = chain
        return out

    def _count(self, recs: list[dict], chain: list, kind: str, weight: float, worked: bool | None) -> None:
        """Count the read on every frame of its chain, except a wait's: a call that reads one line's clock over and
        over with no work between (spinning until a moment passes) times nothing, and what it gave its callers is
        taken back, so a warmup that calls such a wait 40 times is not 40 candidates. A frame that ran work between
        its reads (a loop that runs a candidate until a time has passed) is never a wait."""
        leaf, line = recs[-1], chain[-1].f_lineno
        if worked and leaf["last"] is not None:
            leaf["works"] = True
        if leaf["works"] and leaf["last"] == line:
            weight = 0.0        # a loop running one candidate until a time has passed: its reads time that one
        leaf["lines"][line] = leaf["lines"].get(line, 0) + 1
        leaf["row"] = leaf["row"] + 1 if leaf.get("last") == line else 1
        leaf["last"] = line
        if kind not in leaf["kinds"]:
            leaf["kinds"].append(kind)
        if leaf["spin"]:
            return
        # a wait reads one line again and again with nothing between; a timed loop alternates its reads, or runs
        # its candidate between them
        if not leaf["works"] and leaf["children"] == 0 and leaf["row"] >= MIN_CANDIDATES and \
                not any(k in WHOLE for k in leaf["kinds"]):
            leaf["spin"] = True
            place = (leaf["func"], line)
            if place in self.waited or len(self.waited) < 8:
                self.waited[place] = self.waited.get(place, 0) + 1
            for anc, at in leaf["gave"]:
                anc["lines"][at] -= 1
                if anc["lines"][at] <= 0:
                    del anc["lines"][at]
            for anc in recs[:-1]:
                anc["weight"] -= leaf["up"]
            if leaf["parent"] is not None:
                leaf["parent"]["children"] -= 1
            leaf["weight"] = 0.0
            return
        for rec, fr in zip(recs[:-1], chain, strict=False):
            rec["lines"][fr.f_lineno] = rec["lines"].get(fr.f_lineno, 0) + 1
            if len(leaf["gave"]) < 64:      # a wait shows itself by its third read; a longer call is no wait
                leaf["gave"].append((rec, fr.f_lineno))
            if kind not in rec["kinds"]:
                rec["kinds"].append(kind)
        for rec in recs:
            rec["weight"] += weight
        leaf["up"] += weight

    @staticmethod
    def timed(rec) -> bool:
        """Candidates timed: the threshold's reads, made around work (a timing call, two lines each read at every
        candidate, or reads through calls of their own), not one line spinning on a clock until a moment passes."""
        return rec["weight"] >= MIN_CANDIDATES and (
            rec["children"] >= MIN_CANDIDATES or sum(n >= MIN_CANDIDATES for n in rec["lines"].values()) >= 2 or
            any(k in WHOLE for k in rec["kinds"]))

    def _leaf(self, rec):
        """The deepest frame of this read's chain that holds the threshold's candidates."""
        while rec is not None and not self.timed(rec):
            rec = rec["parent"]
        return rec

    @staticmethod
    def describe(rec) -> dict:
        lines = sorted(rec["lines"], key=lambda ln: -rec["lines"][ln])
        return {"func": rec["func"], "def_line": rec["def_line"], "lines": sorted(lines[:6]), "line": lines[0],
                "path": rec["path"], "candidates": int(rec["weight"]), "clocks": rec["kinds"],
                "seconds": round(rec["t1"] - rec["t0"], 4)}

    def waits(self) -> list[dict]:
        """The clock reads taken for waits: where, and in how many calls."""
        return [{"func": f, "line": ln, "calls": n} for (f, ln), n in self.waited.items()]

    def found(self) -> list[dict]:
        recs = [r for r in [*self.done, *self.recs.values()] if self.timed(r)]
        inner = {id(r["parent"]) for r in recs if r["parent"] is not None}
        return [self.describe(r) for r in recs if id(r) not in inner]

    def linked(self, value) -> bool:
        """The value is one the searches' variables took as they went from candidate to candidate (a loop's
        candidate, a timed call's argument, the best so far): their choice. What stayed the same over the whole
        search (its shape, a salt, the data) is no candidate, and a counter or an input changed beside the search
        is linked to nothing it timed."""
        text = _text(value)
        return text is not None and any(text in got for r in [*self.done, *self.recs.values()] if self.timed(r)
                                        for got in r["values"].values() if len(got) >= 2)


def _text(v) -> str | None:
    """A plain value's text (what the candidate values are compared by); None for anything a literal cannot hold."""
    if isinstance(v, (bool, type(None))):
        return None
    # read at every clock read of every frame on the chain: a value whose text must pass VALUE_TEXT (a string
    # over it; a container of more items than its text can hold, at 3 characters an item) is never walked or
    # formatted
    if isinstance(v, (str, bytes)) and len(v) > VALUE_TEXT or \
            isinstance(v, (tuple, list, dict)) and len(v) > VALUE_TEXT // 3:
        return None
    if not plain(v):
        return None
    text = repr(v)
    return text if len(text) <= VALUE_TEXT else None


def frame_texts(fr) -> dict:
    """The plain values by name in one frame, as text; a worker process's frame (processes.Remote) sent its own."""
    if getattr(fr, "texts", None) is not None:
        return fr.texts
    try:
        return {n: t for n, v in list(fr.f_locals.items()) if (t := _text(v)) is not None}
    except Exception:  # noqa: BLE001 - a frame whose locals cannot be read adds nothing
        return {}


def _values(chain) -> list[dict]:
    """For each frame of a read's chain, the plain values by name in it and in every frame below it: what that
    frame's call had in hand at this read (a deeper frame's name over its caller's)."""
    out, below = [], {}
    for fr in reversed(chain):
        below = {**frame_texts(fr), **below}
        out.append(below)
    return out[::-1]
