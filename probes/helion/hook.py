"""The helion probe's worker side: Helion's BoundKernel.autotune, the search a kernel without a config runs at
its first call per shape (worker/plugins.py loads this module by name into every stage's process).

Events (probe_facts["helion"], read back by facts.py), said as it starts (a deadline can cut it off) and as it
ends: {event: "start" | "tuned", kernel, line (where the submission defines it; None in another file), shape,
case (the phase it ran in), and at the end seconds, the config it chose as plain data, or the error}.
Imports nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

import os
import time


def _shapes(args) -> str:
    """The arguments as Helion specialises on them: each tensor's shape and dtype, other values as they are."""
    return ", ".join(f"{tuple(a.shape)}:{str(a.dtype).replace('torch.', '')}" if hasattr(a, "shape") and
                     hasattr(a, "dtype") else str(a)[:40] for a in args)[:300]


def _who(bound, args, api) -> dict:
    fn = getattr(getattr(bound, "kernel", None), "fn", None)
    code = getattr(fn, "__code__", None)
    mine = isinstance(getattr(code, "co_filename", None), str) and \
        os.path.realpath(code.co_filename) == api.submission
    return {"kernel": getattr(fn, "__name__", "?"), "line": code.co_firstlineno if mine else None,
            "shape": _shapes(args), "case": api.phase}


def patch(mod, api) -> bool:
    cls = getattr(mod, "BoundKernel", None)
    if cls is None or getattr(cls, "_diagnose_watched", False):
        return False
    orig = cls.autotune

    def autotune(self, args, *a, **kw):
        who = _who(self, args, api)
        api.emit(event="start", **who)
        t0, cfg, err = time.perf_counter(), None, None
        try:
            cfg = orig(self, args, *a, **kw)
            return cfg
        except BaseException as e:
            err = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
            raise
        finally:
            try:
                plain = None if cfg is None else {str(k): v for k, v in dict(getattr(cfg, "config", {}) or {}).items()}
                api.emit(event="tuned", **who, seconds=round(time.perf_counter() - t0, 4), config=plain, error=err)
            except Exception:  # noqa: BLE001 - watching never changes the search's own ending
                pass

    cls.autotune = autotune
    cls._diagnose_watched = True
    return True


def install(api) -> None:
    api.on_import("helion.runtime.kernel", lambda mod: patch(mod, api))
    api.on_sample("helion/autotuner", "helion_autotune")
