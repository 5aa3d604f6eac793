"""Watch the libraries that spend a submission's time on its behalf: Triton's autotuner (a probe's own library
watcher lives in its package: worker/plugins.py). The GPU MODE maintainers name autotuning more often
than any other cause of a timeout ("do not autotune on KernelBot").

Neither module is imported here before the submission imports it: the worker's import hook (imports.py) wraps each
one as it is first imported, and one already imported at once. The wrappers only watch: what the library does and
returns is unchanged.

Events:
- autotune_config: one config of one key compiled and timed (kernel, key, config, seconds, ms), as it ends
- autotune_done: a key's tuning finished (kernel, key, configs, seconds, winner)
"""
from __future__ import annotations

import math
import threading
import time


def _jsonable(v):
    if isinstance(v, (bool, int, str, type(None))):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return str(v)[:80]


def config_dict(cfg) -> dict:
    """A triton.Config as plain data: its kwargs and the launch settings that are not defaults."""
    out = {"kwargs": {str(k): _jsonable(v) for k, v in dict(getattr(cfg, "kwargs", {}) or {}).items()},
           "num_warps": getattr(cfg, "num_warps", None), "num_stages": getattr(cfg, "num_stages", None)}
    for extra, default in (("num_ctas", 1), ("maxnreg", None)):
        v = getattr(cfg, extra, default)
        if v != default:
            out[extra] = _jsonable(v)
    return out


def _key_text(key) -> str:
    return ", ".join(map(str, key)) if isinstance(key, tuple) else str(key)


def _kernel(at) -> dict:
    fn = getattr(at, "base_fn", None)
    code = getattr(fn, "__code__", None)
    return {"kernel": getattr(fn, "__name__", "?"), "file": getattr(code, "co_filename", None),
            "line": getattr(code, "co_firstlineno", None)}


def patch_autotuner(mod, ch) -> bool:
    cls = getattr(mod, "Autotuner", None)
    if cls is None or getattr(cls, "_diagnose_watched", False):
        return False
    orig_run, orig_bench = cls.run, getattr(cls, "_bench", None)
    local = threading.local()

    def run(self, *args, **kwargs):
        key = None
        try:      # the key the autotuner itself computes (Autotuner.run): the key args, then each tensor's dtype
            named = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
            named = {k: v for k, v in named.items() if k in self.arg_names}
            key = tuple([named[k] for k in self.keys if k in named] +
                        [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
        except Exception:  # noqa: BLE001 - an autotuner this code does not know: no key, still no harm
            pass
        fresh = key is not None and len(getattr(self, "configs", ())) > 1 and key not in self.cache
        local.key, t0 = key, time.perf_counter()
        self._diagnose_calls = getattr(self, "_diagnose_calls", 0) + 1    # how often a new key came: per call
        try:
            return orig_run(self, *args, **kwargs)
        finally:
            if fresh and key in self.cache:
                ch.emit("autotune_done", **_kernel(self), key=_key_text(key), configs=len(self.configs),
                        seconds=round(time.perf_counter() - t0, 4), winner=config_dict(self.cache[key]),
                        calls=self._diagnose_calls, parts=[str(x)[:80] for x in key])

    def _bench(self, *args, config, **meta):
        t0 = time.perf_counter()
        res = orig_bench(self, *args, config=config, **meta)
        try:
            ms = res[0] if isinstance(res, (list, tuple)) else res
            ch.emit("autotune_config", **_kernel(self), key=_key_text(getattr(local, "key", None)),
                    config=config_dict(config), seconds=round(time.perf_counter() - t0, 4),
                    ms=float(ms) if ms is not None and math.isfinite(float(ms)) else None)
        except Exception:  # noqa: BLE001
            pass
        return res

    cls.run = run
    if orig_bench is not None:
        cls._bench = _bench
    cls._diagnose_watched = True
    return True


PATCHES = {"triton.runtime.autotuner": patch_autotuner}


def install(ch) -> None:
    """Watch each library as it is imported (imports.py), and at once where it already is."""
    from diagnose.runs.worker import imports
    for name, patch in PATCHES.items():
        imports.after(name, lambda mod, p=patch: p(mod, ch))
    imports.install()
