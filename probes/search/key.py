"""What a pinned search is told apart by: one function, as text, that both the tuning run's hook (returns.py) and
the pinned file (pin.py) run, so the key the run recorded is the key the pinned code computes.

Plain values count as they are, arrays by their shape and dtype (an input's values never pick a config),
containers by their items, an object of the submission's own classes by its type and its attributes that are not
bare numbers (a per-shape plan's arrays; a number on it may be a call counter), anything else by its type's name.
A search told apart by something else (a float computed per call, a counter) misses the table, searches again,
and its run shows it: the pin did not take, and the report says so rather than crediting it.
"""
from __future__ import annotations

KEY_NAME = "_pinned_key"
KEY_SOURCE = f'''def {KEY_NAME}(*values):
    """A pinned search's key: plain values as they are, arrays by shape and dtype, containers by their items."""
    def one(v, depth=0):
        if isinstance(v, (int, float, str, bool, bytes, type(None))):
            return v
        if hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, type):
            try:
                return ("array", tuple(int(x) for x in v.shape), str(v.dtype))
            except (TypeError, ValueError):
                return type(v).__name__
        if isinstance(v, (tuple, list)) and depth < 3 and len(v) <= 64:
            return tuple(one(x, depth + 1) for x in v)
        if isinstance(v, dict) and depth < 3 and len(v) <= 64:
            return tuple(sorted((repr(k), one(x, depth + 1)) for k, x in v.items()))
        own = getattr(v, "__dict__", None)
        if depth < 2 and isinstance(own, dict) and type(v).__module__ == "submission" and len(own) <= 32:
            # an object of the submission's own class (a method's self, a per-shape plan): by its arrays and its
            # containers of them, which say the shape it stands for; a bare number on it may be a counter
            return (type(v).__name__, tuple(sorted((k, one(x, depth + 1)) for k, x in own.items()
                                                   if not isinstance(x, (int, float, bool)) and not callable(x))))
        return type(v).__name__
    return tuple(one(v) for v in values)
'''


def key_function():
    """The key function itself, made from the same text the pinned file holds."""
    ns: dict = {}
    exec(compile(KEY_SOURCE, "<pinned key>", "exec"), ns)   # noqa: S102 - our own constant text, never input
    return ns[KEY_NAME]


def parameters(code) -> tuple[str, ...]:
    """A function's parameter names in the order its code object keeps them (positional, keyword-only, *args,
    **kwargs): the order pin.py passes them to the key in, read from the def."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)      # CO_VARARGS, CO_VARKEYWORDS
    return tuple(code.co_varnames[:n])
