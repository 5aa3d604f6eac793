"""The helion_configs probe's hook in the worker (loaded by name: ProbeInfo.hook). It watches Helion's
FiniteSearch, the search a kernel declared with configs=[a, b, ...] runs at each new shape (it compiles and
benchmarks every listed config, and HELION_DISALLOW_AUTOTUNING does not stop it: that rule only guards the
autotuner a kernel without configs runs). Each search is said as it starts (a deadline can cut it off) and as
it ends, with the config it chose as plain data and the shape key the pinned file looks it up by.

Helion's full autotuners (RandomSearch and the like derive from FiniteSearch) are not this mechanism: only a
search over the kernel's own listed configs counts.
"""
from __future__ import annotations

import time

from probes.helion_configs.key import key_function

KEY = key_function()


def _who(search, phase: str | None) -> dict:
    bound = getattr(search, "kernel", None)
    fn = getattr(getattr(bound, "kernel", None), "fn", None)
    code = getattr(fn, "__code__", None)
    args = tuple(getattr(search, "args", ()) or ())
    return {"kernel": getattr(fn, "__name__", "?"), "file": getattr(code, "co_filename", None),
            "line": getattr(code, "co_firstlineno", None), "key": repr(KEY(args)), "phase": phase,
            "configs": len(getattr(search, "configs", ()) or ())}


def _listed(search) -> bool:
    """A search over the kernel's own configs=[...] list (not a full autotuner built on FiniteSearch)."""
    listed = getattr(getattr(getattr(search, "kernel", None), "kernel", None), "configs", None) or []
    return len(listed) >= 2 and type(search).__name__ in ("FiniteSearch", "CachedFiniteSearch")


def install(api) -> None:
    def patch(mod) -> None:
        cls = getattr(mod, "FiniteSearch", None)
        if cls is None or getattr(cls, "_diagnose_listed", False):
            return
        orig = cls.autotune

        def autotune(self, *a, **kw):
            if not _listed(self):
                return orig(self, *a, **kw)
            who = _who(self, api.phase)
            api.emit(event="start", **who)
            t0, cfg, err = time.perf_counter(), None, None
            try:
                cfg = orig(self, *a, **kw)
                return cfg
            except BaseException as e:
                err = f"{type(e).__name__}: {str(e).strip()[:200]}"
                raise
            finally:
                plain = None if cfg is None else {str(k): v for k, v in dict(getattr(cfg, "config", {}) or {}).items()}
                api.emit(event="end", **who, seconds=round(time.perf_counter() - t0, 4), config=plain, error=err)

        cls.autotune = autotune
        cls._diagnose_listed = True

    api.on_import("helion.autotuner.finite_search", patch)
