"""Where the submission's module keeps state, and what a phase changed there (hook.py compares the two around each
first call and tuning phase): keys added to module-level dicts and other mappings (an OrderedDict, a
WeakValueDictionary, os.environ), to the dicts of its classes and of module-level instances of them (its own
classes' and a types.SimpleNamespace's); lists appended to; functools caches that grew; attributes bound again."""
from __future__ import annotations

import os
import types
from collections.abc import MutableMapping

from probes.search import objects
from probes.search.watch import KEYS_SHOWN, plain

ENVIRON = "os.environ"      # the process's environment, a place a search may keep its choice in (as text)
MAPPINGS = ("dict", "mapping")
ADDED_CAP = 512             # entries one phase may add to a mapping and still be recorded for the pin


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
        if own or made or isinstance(v, types.SimpleNamespace):
            for a, x in list(vars(v).items()):
                if not a.startswith("__"):
                    _place(out, f"{name}.{a}", x, attr=True)
    _place(out, ENVIRON, os.environ, attr=False)
    return out


def _place(out: dict, path: str, v, attr: bool) -> None:
    if isinstance(v, dict):
        out[path] = ("dict", frozenset(v) if len(v) < 20_000 else len(v), v)
    elif isinstance(v, MutableMapping) and not callable(v):
        try:    # a mapping of a library's (a weak table, the environment): by its keys, as a dict
            out[path] = ("mapping", frozenset(v) if len(v) < 20_000 else len(v), v)
        except Exception:  # noqa: BLE001 - a mapping whose keys cannot be listed is no place to read
            pass
    elif isinstance(v, list):
        # a list the choices are appended to: by its length (and its last item's identity, for one that was
        # cleared and refilled to the same length)
        out[path] = ("list", (len(v), id(v[-1]) if v else None), v)
    elif callable(getattr(v, "cache_info", None)) and callable(v):
        try:
            out[path] = ("cache", v.cache_info().currsize, v)
        except Exception:  # noqa: BLE001 - the submission's own cache object: its cache_info may raise anything
            pass
    elif not callable(v) and (attr or isinstance(v, (int, float, str, tuple, bool, type(None)))):
        # a plain value by its text (an int bound again may keep its id); anything else by identity: the repr of
        # a tuple of tensors would format them (and wait for the GPU)
        out[path] = ("attr", (id(v), repr(v)[:200]) if plain(v) else id(v), v)


def changed(before: dict, after: dict, linked=None) -> list[dict]:
    """What the phase changed in the module's places; with `linked(value)`, whether each new value is one its
    searches held while timing (a cache's new entries cannot be listed outside a tuning run: not judged)."""
    out = []
    for path, (kind, mark, obj) in after.items():
        old = before.get(path)
        if old is not None and old[1] == mark:
            continue
        if old is not None and old[0] != kind:      # None then a dict: the place is new now
            old = None
        rec = {"path": path, "kind": kind}
        new: list = []
        if kind in MAPPINGS:
            added = (mark - old[1]) if old and isinstance(mark, frozenset) and isinstance(old[1], frozenset) else \
                (set(obj) if old is None else set())
            shown = list(added)[:KEYS_SHOWN]
            grew = (mark - old[1]) if old and isinstance(mark, int) and isinstance(old[1], int) else 0
            rec.update(added=len(added) if added else grew,
                       keys=[repr(k)[:80] for k in shown], plain=all(pinnable(obj.get(k)) for k in shown))
            new = [obj.get(k) for k in shown]
            if rec["added"] <= 0:
                continue
        elif kind == "list":
            start = old[1][0] if old and old[1][0] <= mark[0] else 0
            new = obj[start:start + KEYS_SHOWN]
            rec.update(added=mark[0] - start, plain=all(pinnable(x) for x in new))
            if rec["added"] <= 0:
                continue
        elif kind == "cache":
            rec["added"] = mark - (old[1] if old and old[0] == "cache" else 0)
            if rec["added"] <= 0:
                continue
        else:
            rec.update(value=repr(obj)[:120] if plain(obj) else type(obj).__name__, plain=pinnable(obj))
            new = [obj]
        if linked is not None and kind != "cache":
            rec["linked"] = any(objects.made_of(linked, x) for x in new)
        out.append(rec)
    return out


def pinnable(v) -> bool:
    """A value the pin can write: plain (a literal holds it), or objects of the submission's classes made of such."""
    return plain(v) or objects.text(v) is not None


def added(before: dict, after: dict) -> dict[str, list]:
    """The (key, value) pairs each mapping place took in the phase: a cache bounded to a few shapes drops the first
    ones again, so the pin is made of every shape the searches chose for, not of what the place held at the end."""
    out = {}
    for path, (kind, mark, obj) in after.items():
        if kind not in MAPPINGS or not isinstance(mark, frozenset):
            continue
        old = before.get(path)
        new = mark - old[1] if old is not None and isinstance(old[1], frozenset) else mark
        if 0 < len(new) <= ADDED_CAP:      # more in one phase is no per-shape choice, and no pin would hold it
            out[path] = [(k, obj.get(k)) for k in new]
    return out
