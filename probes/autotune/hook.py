"""The autotune probe's worker side: Triton's Autotuner, which compiles and times every config at each new key
(worker/plugins.py loads this module by name into every stage's process and the evaluator's).

triton.runtime.autotuner is not imported here before the submission imports it: the worker's import hook wraps
it as it is first imported. The wrapper only watches: what the autotuner does and returns is unchanged.

Events (probe_facts["autotune"], read back by facts.py): one running record per (kernel, key), said again after
each config it timed and when the key's tuning ends, under one `slot`, so the runner keeps only its latest (a
deadline finds what was timed so far, and a key that retunes on every call costs one record, not one per config):
{event: "tuned", slot, kernel, line (where the submission defines it; None in another file), key, tried,
seconds (the configs' compile-and-time, summed), best {config, ms} (the fastest timed), winner, done}, and once
done, configs, tuning_s (the call's wall time), calls (the autotuner's calls so far), parts (the key's values).
Imports nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

import math
import os
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


def _key(at, args, kwargs):
    """The key the autotuner itself computes (Autotuner.run): the key args, then each tensor's dtype."""
    try:
        named = {**dict(zip(at.arg_names, args, strict=False)), **kwargs}
        named = {k: v for k, v in named.items() if k in at.arg_names}
        return tuple([named[k] for k in at.keys if k in named] +
                     [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
    except Exception:  # noqa: BLE001 - an autotuner this code does not know: no key, still no harm
        return None


class Tunes:
    """This process's records, per (kernel, key): summed over every autotuner of that kernel's name (one made
    anew on each call tunes the same key again), each said as it changes."""

    def __init__(self, api):
        self.api, self.lock, self.recs, self.pid = api, threading.Lock(), {}, os.getpid()

    def _rec(self, at, key: str) -> dict:
        if self.pid != os.getpid():      # a forked child: its own records, not a second copy of its parent's
            self.recs, self.pid = {}, os.getpid()
        fn = getattr(at, "base_fn", None)
        kernel, code = getattr(fn, "__name__", "?"), getattr(fn, "__code__", None)
        file = getattr(code, "co_filename", None)
        mine = isinstance(file, str) and os.path.realpath(file) == self.api.submission
        return self.recs.setdefault((kernel, key), {
            "kernel": kernel, "line": getattr(code, "co_firstlineno", None) if mine else None, "key": key,
            "tried": 0, "seconds": 0.0, "best": None, "winner": None, "done": False})

    def _say(self, r: dict) -> None:
        self.api.emit(event="tuned", slot=f"{r['kernel']}|{r['key']}", **r)

    def timed(self, at, key: str, cfg, seconds: float, ms) -> None:
        with self.lock:
            r = self._rec(at, key)
            r["tried"] += 1
            r["seconds"] = round(r["seconds"] + seconds, 4)
            if isinstance(ms, (int, float)) and (r["best"] is None or ms < r["best"]["ms"]):
                r["best"] = {"config": config_dict(cfg), "ms": ms}
            self._say(r)

    def done(self, at, key, seconds: float, calls: int) -> None:
        with self.lock:
            r = self._rec(at, _key_text(key))
            r.update(done=True, winner=config_dict(at.cache[key]), configs=len(at.configs), tuning_s=seconds,
                     calls=calls, parts=[str(x)[:80] for x in key])
            self._say(r)


def patch(mod, api) -> bool:
    cls = getattr(mod, "Autotuner", None)
    if cls is None or getattr(cls, "_diagnose_watched", False):
        return False
    orig_run, orig_bench = cls.run, getattr(cls, "_bench", None)
    local, tunes = threading.local(), Tunes(api)

    def run(self, *args, **kwargs):
        key = _key(self, args, kwargs)
        fresh = key is not None and len(getattr(self, "configs", ())) > 1 and key not in self.cache
        local.key, t0 = key, time.perf_counter()
        self._diagnose_calls = getattr(self, "_diagnose_calls", 0) + 1    # how often a new key came: per call
        try:
            return orig_run(self, *args, **kwargs)
        finally:
            if fresh and key in self.cache:
                try:
                    tunes.done(self, key, round(time.perf_counter() - t0, 4), self._diagnose_calls)
                except Exception:  # noqa: BLE001 - watching never changes the call's own ending
                    pass

    def _bench(self, *args, config, **meta):
        t0 = time.perf_counter()
        res = orig_bench(self, *args, config=config, **meta)
        try:
            ms = res[0] if isinstance(res, (list, tuple)) else res
            tunes.timed(self, _key_text(getattr(local, "key", None)), config, round(time.perf_counter() - t0, 4),
                        float(ms) if ms is not None and math.isfinite(float(ms)) else None)
        except Exception:  # noqa: BLE001
            pass
        return res

    cls.run = run
    if orig_bench is not None:
        cls._bench = _bench
    cls._diagnose_watched = True
    return True


def install(api) -> None:
    api.on_import("triton.runtime.autotuner", lambda mod: patch(mod, api))
    # the sampler's name for time below the autotuner's frames (INFO.mechanisms)
    api.on_sample("triton/runtime/autotuner.py", "triton_autotune")
