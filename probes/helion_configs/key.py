"""What a pinned config is told apart by: one function, as text, that both the hook (at each search) and the
pinned file (at each bind) run, so the shape the tuning run recorded is the key the pinned code looks up.

Tensors count by shape and dtype (as Helion's static_shapes specialises on them), plain values as they are,
anything else by its type's name. A call whose key the table lacks binds as before: Helion searches its list
again, and that run shows it (the pin did not take).
"""
from __future__ import annotations

KEY_NAME = "_helion_shape_key"
KEY_SOURCE = f'''def {KEY_NAME}(args):
    """A Helion call's shape: each tensor's shape and dtype, plain values as they are."""
    def one(v):
        if hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, type):
            return (tuple(int(x) for x in v.shape), str(v.dtype).replace("torch.", ""))
        return v if isinstance(v, (int, float, str, bool, type(None))) else type(v).__name__
    return tuple(one(v) for v in args)
'''


def key_function():
    """The key function itself, made from the same text the pinned file holds."""
    ns: dict = {}
    exec(compile(KEY_SOURCE, "<helion shape key>", "exec"), ns)   # noqa: S102 - our own constant text, never input
    return ns[KEY_NAME]
