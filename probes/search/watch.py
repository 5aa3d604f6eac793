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
import time
import types

MIN_CANDIDATES = 3
CLOCKS = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns")
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
    kinds = sorted({type(v).__name__ for v in _leaves(value)})
    return None, f"it holds {', '.join(kinds[:4]) or type(value).__name__}, which no constant in a source file can"


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

    def __init__(self, api, phase: str):
        self.api, self.phase = api, phase
        self.recs: dict[int, dict] = {}
        self.done: list[dict] = []
        self.prev: list = []
        self.sent: set = set()

    def read(self, kind: str, weight: float, first) -> None:
        chain, f = [], first
        while f is not None:
            if f.f_code.co_filename.startswith(self.api.submission_dir):
                chain.append(f)
            f = f.f_back
        chain.reverse()
        now, parent, same = time.perf_counter(), None, True
        for i, fr in enumerate(chain):
            same = same and i < len(self.prev) and self.prev[i] is fr
            rec = self.recs.get(id(fr)) if same else None
            if rec is None:
                old = self.recs.get(id(fr))
                if old is not None and self.timed(old):
                    self.done.append(old)
                rec = self.recs[id(fr)] = {
                    "func": fr.f_code.co_name, "file": fr.f_code.co_filename, "def_line": fr.f_code.co_firstlineno,
                    "depth": i, "weight": 0.0, "lines": {}, "kinds": [], "t0": now, "parent": parent, "children": 0,
                    "path": [{"func": c.f_code.co_name, "line": c.f_lineno} for c in chain[:i]]}
                if parent is not None:
                    parent["children"] += 1
            rec["weight"] += weight
            rec["lines"][fr.f_lineno] = rec["lines"].get(fr.f_lineno, 0) + 1
            if kind not in rec["kinds"]:
                rec["kinds"].append(kind)
            rec["t1"] = now
            parent = rec
        self.prev = chain
        if chain:
            leaf = self._leaf(self.recs[id(chain[-1])])
            if leaf is not None and id(leaf) not in self.sent:
                self.sent.add(id(leaf))
                self.api.emit(what="searching", phase=self.phase, search=self.describe(leaf))

    @staticmethod
    def timed(rec) -> bool:
        """Candidates timed: the threshold's reads, made around work (a timing call, two lines each read at every
        candidate, or reads through calls of their own), not one line spinning on a clock until a moment passes."""
        return rec["weight"] >= MIN_CANDIDATES and (
            rec["children"] >= MIN_CANDIDATES or sum(n >= MIN_CANDIDATES for n in rec["lines"].values()) >= 2 or
            any(k in ("do_bench", "cuda.Event.elapsed_time") for k in rec["kinds"]))

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

    def found(self) -> list[dict]:
        recs = [r for r in [*self.done, *self.recs.values()] if self.timed(r)]
        inner = {id(r["parent"]) for r in recs if r["parent"] is not None}
        return [self.describe(r) for r in recs if id(r) not in inner]


def _places(mod) -> dict:
    """Where the module keeps state: path -> (kind, fingerprint, the object)."""
    out = {}
    for name, v in list(vars(mod).items()):
        if name.startswith("__") or isinstance(v, types.ModuleType):
            continue
        _place(out, name, v, attr=False)
        own = isinstance(v, type) and v.__module__ == mod.__name__
        made = not isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType)) and \
            type(v).__module__ == mod.__name__ and hasattr(v, "__dict__")
        if own or made:
            for a, x in list(vars(v).items()):
                if not a.startswith("__"):
                    _place(out, f"{name}.{a}", x, attr=True)
    return out


def _place(out: dict, path: str, v, attr: bool) -> None:
    if isinstance(v, dict):
        out[path] = ("dict", frozenset(v) if len(v) < 20_000 else len(v), v)
    elif callable(getattr(v, "cache_info", None)) and callable(v):
        try:
            out[path] = ("cache", v.cache_info().currsize, v)
        except Exception:  # noqa: BLE001
            pass
    elif not callable(v) and (attr or isinstance(v, (int, float, str, tuple, bool, type(None)))):
        # a plain value by its text (an int bound again may keep its id); anything else by identity: the repr of
        # a tuple of tensors would format them (and wait for the GPU)
        out[path] = ("attr", (id(v), repr(v)[:200]) if plain(v) else id(v), v)


def changed(before: dict, after: dict) -> list[dict]:
    out = []
    for path, (kind, mark, obj) in after.items():
        old = before.get(path)
        if old is not None and old[1] == mark:
            continue
        if old is not None and old[0] != kind:      # None then a dict: the place is new now
            old = None
        rec = {"path": path, "kind": kind}
        if kind == "dict":
            added = (mark - old[1]) if old and isinstance(mark, frozenset) and isinstance(old[1], frozenset) else \
                (set(obj) if old is None else set())
            shown = list(added)[:KEYS_SHOWN]
            grew = (mark - old[1]) if old and isinstance(mark, int) and isinstance(old[1], int) else 0
            rec.update(added=len(added) if added else grew,
                       keys=[repr(k)[:80] for k in shown], plain=all(plain(obj.get(k)) for k in shown))
            if rec["added"] <= 0:
                continue
        elif kind == "cache":
            rec["added"] = mark - (old[1] if old and old[0] == "cache" else 0)
            if rec["added"] <= 0:
                continue
        else:
            rec.update(value=repr(obj)[:120] if plain(obj) else type(obj).__name__, plain=plain(obj))
        out.append(rec)
    return out
