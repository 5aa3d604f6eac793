"""The numerics probe's worker side, below its hook (hook.py): why an output is wrong, in numbers; and the numeric
settings each side computed under. Imports nothing of diagnose's: it runs in the submission's processes.

- `error_stats(out, ref, rtol, atol)`: the largest absolute and relative errors, how many elements are
  outside the tolerance, and the worst few (index, got, expected).
- `tolerance(check)`: rtol and atol where the checker keeps them (a closure of make_match_reference, or
  module constants of the reference).
- `Settings`: torch's numeric switches (TF32 for cuBLAS and cuDNN, float32 matmul precision, deterministic
  algorithms, cuDNN deterministic and benchmark, the default dtype) as they stand while a function computes:
  a profiler hook reads them at each call into a builtin, so settings a reference applies inside its own
  body (a `with DeterministicContext():`) are seen too.
"""
from __future__ import annotations

import functools
import math
import sys

TOP = 3
_SETTERS = ("set", "get", "use_deterministic", "are_deterministic", "setprofile", "getprofile")


def read(torch) -> dict:
    b = torch.backends
    out = {"cuda.matmul.allow_tf32": bool(b.cuda.matmul.allow_tf32), "cudnn.allow_tf32": bool(b.cudnn.allow_tf32),
           "float32_matmul_precision": torch.get_float32_matmul_precision(),
           "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
           "cudnn.deterministic": bool(b.cudnn.deterministic), "cudnn.benchmark": bool(b.cudnn.benchmark),
           "default_dtype": str(torch.get_default_dtype()).replace("torch.", "")}
    return out


def _computes(fn) -> bool:
    if getattr(fn, "__name__", "").lstrip("_").startswith(_SETTERS):
        return False
    return (getattr(fn, "__module__", None) or "").startswith("torch") or \
        type(getattr(fn, "__self__", None)).__name__ in ("Tensor", "Parameter")


class Settings:
    """The settings seen while a wrapped function ran (the last value of each, from inside its calls)."""

    def __init__(self, torch):
        self.torch = torch
        self.seen: dict | None = None

    def watch(self, fn):
        torch, me = self.torch, self

        @functools.wraps(fn)
        def watched(*args, **kwargs):
            if me.seen is not None:
                return fn(*args, **kwargs)      # the first call says it; the rest run untouched
            entry, at_work = read(torch), {}

            def prof(frame, event, arg):
                # the settings as they stand when the function computes: at each call into one of torch's
                # own builtins (a torch function, a tensor method) that is not a setting's getter or setter
                # (a context's __exit__ restores them after, and other builtins run there too)
                if event == "c_call" and _computes(arg):
                    at_work.update(read(torch))
            old = sys.getprofile()
            sys.setprofile(prof)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(old)
                me.seen = at_work or entry
        return watched


def tolerance(check) -> tuple[float | None, float | None]:
    """(rtol, atol) as the checker holds them, or None where it does not say."""
    found = {}
    code, cells = getattr(check, "__code__", None), getattr(check, "__closure__", None) or ()
    for name, cell in zip(getattr(code, "co_freevars", ()), cells, strict=False):
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if name in ("rtol", "atol") and isinstance(v, (int, float)):
            found[name] = float(v)
        elif isinstance(v, dict):       # make_match_reference(ref, **kwargs): the kwargs it closes over
            for k in ("rtol", "atol"):
                if isinstance(v.get(k), (int, float)):
                    found.setdefault(k, float(v[k]))
    try:       # keyword defaults: check_implementation(data, output, rtol=1e-3, atol=1e-3)
        import inspect
        for name, par in inspect.signature(check).parameters.items():
            if name in ("rtol", "atol") and name not in found and isinstance(par.default, (int, float)):
                found[name] = float(par.default)
    except (TypeError, ValueError):
        pass
    g = getattr(check, "__globals__", {})
    for name in ("rtol", "atol"):
        for key in (name, name.upper()):
            if name not in found and isinstance(g.get(key), (int, float)):
                found[name] = float(g[key])
    return found.get("rtol"), found.get("atol")


def error_stats(torch, out, ref, rtol: float | None, atol: float | None) -> dict | None:
    """How far a tensor output is from the reference's, or None when they cannot be compared."""
    if not (isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)) or out.shape != ref.shape:
        return None
    o, r = out.detach().double().flatten().cpu(), ref.detach().double().flatten().cpu()
    if o.numel() == 0:
        return None
    diff = (o - r).abs()
    rel = diff / r.abs().clamp_min(1e-30)
    finite = torch.isfinite(diff)
    st = {"elements": int(o.numel()), "max_abs": _f(diff[finite].max()) if finite.any() else None,
          "max_rel": _f(rel[finite].max()) if finite.any() else None, "non_finite": int((~finite).sum()),
          "rtol": rtol, "atol": atol}
    if rtol is not None or atol is not None:
        bound = (atol or 0.0) + (rtol or 0.0) * r.abs()
        outside = ~(diff <= bound)
        st["outside"] = int(outside.sum())
    score = torch.where(finite, diff, torch.full_like(diff, math.inf))
    worst = torch.topk(score, min(TOP, o.numel())).indices.tolist()
    shape = list(out.shape)
    st["worst"] = [{"index": _unravel(i, shape), "got": _f(o[i]), "expected": _f(r[i])} for i in worst]
    return st


def _f(x) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def _unravel(i: int, shape: list[int]) -> list[int]:
    out = []
    for d in reversed(shape):
        out.append(i % d if d else 0)
        i = i // d if d else 0
    return list(reversed(out))
