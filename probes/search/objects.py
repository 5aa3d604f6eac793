"""A search's choice that is an object of the submission's own classes (a per-shape plan, a dataclass of a block
size and a warp count), written as source that makes it again: `_pinned_object(Plan, {'block': 32, 'warps': 4})`.

The pinned file makes each such object without running its __init__ (its fields as the tuning run left them, which
is what the code read), and keeps it alive in a module list, so a weak table pinned with it (a
WeakValueDictionary) still holds it. Only a class the module binds at its top level by that name qualifies, and
only fields that are plain values or such objects in turn; anything else is not written.

Used by the worker's hook (no diagnose import) and by pin.py, which adds OBJECT_SOURCE where a text needs it.
"""
from __future__ import annotations

import ast
import re
import sys

MAKE = "_pinned_object"
OBJECT_SOURCE = f'''_PINNED_OBJECTS = []


def {MAKE}(cls, fields):
    """An object of the submission's own class as the tuning run left it: its fields set, its __init__ not run; kept
    alive here, so a weak table pinned with it keeps it."""
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    _PINNED_OBJECTS.append(obj)
    return obj
'''
MODULE = "submission"          # the name the worker imports the submission by (key.py counts its classes too)
DEPTH = 4
ITEMS = 2000


def fields(v) -> dict | None:
    """An object's own fields (its __dict__, else its __slots__), or None where it has neither to read."""
    own = getattr(v, "__dict__", None)
    if isinstance(own, dict):
        return dict(own)
    slots = [s for c in type(v).__mro__ for s in getattr(c, "__slots__", ()) if isinstance(s, str)]
    if not slots:
        return None
    return {s: getattr(v, s) for s in slots if s not in ("__dict__", "__weakref__") and hasattr(v, s)}


def own_class(v) -> bool:
    """An instance of a class the submission's module binds at its top level under its own name."""
    cls = type(v)
    if cls.__module__ != MODULE or "." in cls.__qualname__ or "<" in cls.__qualname__:
        return False
    module = sys.modules.get(MODULE)
    return module is None or getattr(module, cls.__qualname__, None) is cls


def text(v, depth: int = 0) -> str | None:
    """Source that makes `v` again, where it holds objects of the submission's own classes among plain values;
    None where anything in it cannot be written (a tensor, a function, a class of a library)."""
    if depth > DEPTH:
        return None
    if v is None or isinstance(v, (bool, int, float, str, bytes)):
        t = repr(v)
        return None if t in ("nan", "inf", "-inf") else t
    if isinstance(v, (tuple, list)) and len(v) <= ITEMS:
        parts = [text(x, depth + 1) for x in v]
        if any(p is None for p in parts):
            return None
        body = ", ".join(parts)
        return f"[{body}]" if isinstance(v, list) else f"({body}{',' if len(parts) == 1 else ''})"
    if isinstance(v, dict) and len(v) <= ITEMS:
        pairs = [(text(k, depth + 1), text(x, depth + 1)) for k, x in v.items()]
        if any(k is None or x is None for k, x in pairs):
            return None
        return "{" + ", ".join(f"{k}: {x}" for k, x in pairs) + "}"
    if own_class(v):
        own = fields(v)
        if own is None or len(own) > 64 or not all(isinstance(k, str) for k in own):
            return None
        inner = text(own, depth + 1)
        return None if inner is None else f"{MAKE}({type(v).__qualname__}, {inner})"
    return None


def classes(source_text: str) -> list[str]:
    """The classes a text makes objects of: the pin must come after the module binds them."""
    return sorted(set(re.findall(rf"\b{MAKE}\((\w+), ", source_text or "")))


def parts(v) -> list:
    """What a value is built of, for the question whether the search had it in hand: a tuple's or a list's items,
    an object's fields (a plan made of a block and a warp count it timed), a number kept as its text (os.environ
    holds only strings)."""
    if isinstance(v, (tuple, list)) and len(v) <= 64:
        return list(v)
    if isinstance(v, str) and 0 < len(v) <= 200:
        try:
            got = ast.literal_eval(v.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return []
        return [] if isinstance(got, str) else [got]
    if own_class(v):
        own = fields(v) or {}
        return list(own.values()) if len(own) <= 64 else []
    return []


def made_of(linked, v, depth: int = 0) -> bool:
    """The value is one the search held while timing (`linked`), or is built of such values: a tuple of two loop
    variables, a plan object whose fields took the candidates' values."""
    if linked(v):
        return True
    return depth < 3 and any(made_of(linked, x, depth + 1) for x in parts(v))
