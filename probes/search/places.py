"""Where the submission's module keeps state, and what a phase changed there (hook.py compares the two around each
first call and tuning phase): keys added to module-level dicts, to the dicts of its classes and of module-level
instances of them; lists appended to; functools caches that grew; attributes bound again."""
from __future__ import annotations

import types

from probes.search.watch import KEYS_SHOWN, plain


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
        if kind == "dict":
            added = (mark - old[1]) if old and isinstance(mark, frozenset) and isinstance(old[1], frozenset) else \
                (set(obj) if old is None else set())
            shown = list(added)[:KEYS_SHOWN]
            grew = (mark - old[1]) if old and isinstance(mark, int) and isinstance(old[1], int) else 0
            rec.update(added=len(added) if added else grew,
                       keys=[repr(k)[:80] for k in shown], plain=all(plain(obj.get(k)) for k in shown))
            new = [obj.get(k) for k in shown]
            if rec["added"] <= 0:
                continue
        elif kind == "list":
            start = old[1][0] if old and old[1][0] <= mark[0] else 0
            new = obj[start:start + KEYS_SHOWN]
            rec.update(added=mark[0] - start, plain=all(plain(x) for x in new))
            if rec["added"] <= 0:
                continue
        elif kind == "cache":
            rec["added"] = mark - (old[1] if old and old[0] == "cache" else 0)
            if rec["added"] <= 0:
                continue
        else:
            rec.update(value=repr(obj)[:120] if plain(obj) else type(obj).__name__, plain=plain(obj))
            new = [obj]
        if linked is not None and kind != "cache":
            rec["linked"] = any(linked(x) or (isinstance(x, (tuple, list)) and any(map(linked, x))) for x in new)
        out.append(rec)
    return out
