"""The search probe's hook in the worker (loaded by name: ProbeInfo.hook). It arms during each `first_call:` and
`tune:` phase, and sends per phase what watch.py recorded: the searches that ran and the state they left.

In a tuning run (stage "tune") it also wraps each functools cache of the submission's module, and of its
classes, to record what each argument tuple returned (a C cache cannot list its contents); at the stage's end
it sends the final value of every place a phase changed, as source text where a literal can hold it.
Nothing it wraps changes what the submission computes.
"""
from __future__ import annotations

import functools
import sys
import threading
import time

from probes.search.watch import CLOCKS, Search, _places, changed, literal_text

ARMED = ("first_call:", "tune:")


class Hook:
    def __init__(self, api):
        self.api = api
        self.main = threading.main_thread().ident
        self.search: Search | None = None
        self.before: dict | None = None
        self.touched: dict[str, str] = {}          # tuning: path -> kind, over every phase
        self.calls: dict[str, dict] = {}            # tuning: cache path -> {args: result}
        self.methods: set[str] = set()              # tuning: the cache paths that are methods (keyed without self)
        self.wrapped = False
        self.busy = False
        self.case = None

    # -- clocks --------------------------------------------------------------------------------------------
    def clock(self, fn, kind: str, weight: float):
        hook = self

        @functools.wraps(fn)
        def read(*a, **k):
            if hook.search is not None and not hook.busy and threading.get_ident() == hook.main:
                caller = sys._getframe(1)
                if caller.f_code.co_filename.startswith(hook.api.submission_dir):
                    hook.busy = True
                    try:
                        hook.search.read(kind, weight, caller)
                    except Exception:  # noqa: BLE001 - the probe's record never breaks the submission's call
                        pass
                    finally:
                        hook.busy = False
            return fn(*a, **k)
        return read

    def patch_clocks(self) -> None:
        for name in CLOCKS:
            setattr(time, name, self.clock(getattr(time, name), f"time.{name}", 0.5))
        self.api.on_import("triton.testing", lambda m: setattr(m, "do_bench", self.clock(m.do_bench, "do_bench", 1)))

    def events(self, torch) -> None:
        """CUDA events' elapsed_time, patched on the class once torch is up (before the guard notes it): the
        submission's events are made from it however it imported it."""
        ev = getattr(getattr(torch, "cuda", None), "Event", None)
        if ev is not None and hasattr(ev, "elapsed_time") and not hasattr(ev.elapsed_time, "__wrapped__"):
            ev.elapsed_time = self.clock(ev.elapsed_time, "cuda.Event.elapsed_time", 1)

    # -- phases --------------------------------------------------------------------------------------------
    def phase(self, what: str, name: str, fields: dict) -> None:
        if not name.startswith(ARMED):
            return
        mod = sys.modules.get("submission")
        if what == "begin":
            if name.startswith("tune:") and mod is not None and not self.wrapped:
                self.wrapped = True
                self._record_caches(mod)
            self.search, self.before = Search(self.api, name), (_places(mod) if mod is not None else None)
            self.case = fields.get("case")
            return
        if self.search is None:
            return
        found, self.search = self.search.found(), None
        left = changed(self.before, _places(mod)) if mod is not None and self.before is not None else []
        for rec in left:
            self.touched[rec["path"]] = rec["kind"]
        if found or left:
            self.api.emit(what="phase", phase=name, case=self.case, ok=fields.get("ok"),
                          searches=found, changed=left)

    # -- a tuning run ----------------------------------------------------------------------------------------
    def _record_caches(self, mod) -> None:
        for path, (kind, _, obj) in _places(mod).items():
            if kind != "cache" or not hasattr(obj, "__wrapped__"):
                continue
            owner, _, attr = path.rpartition(".")
            holder = getattr(mod, owner) if owner else mod
            method = bool(owner) and isinstance(holder, type)
            if method:
                self.methods.add(path)
            log = self.calls.setdefault(path, {})

            def recorded(*a, _fn=obj, _log=log, _method=method, **k):
                out = _fn(*a, **k)
                if not k and len(_log) < 5000:
                    _log[tuple(a[1:]) if _method else tuple(a)] = out
                return out
            for name in ("cache_info", "cache_clear", "cache_parameters", "__wrapped__"):
                if hasattr(obj, name):
                    setattr(recorded, name, getattr(obj, name))
            setattr(holder, attr or path, recorded)

    def stage_end(self, stage: str) -> None:
        if stage != "tune":
            return
        mod = sys.modules.get("submission")
        places = _places(mod) if mod is not None else {}
        for path, kind in sorted(self.touched.items()):
            value = self.calls.get(path) if kind == "cache" else (places.get(path) or (None, None, None))[2]
            text, why = literal_text(value) if value is not None else (None, "it was not there at the end")
            rec = {"what": "kept", "path": path, "kind": kind, "method": path in self.methods,
                   "entries": len(value) if isinstance(value, dict) else None, "text": text, "error": why}
            self.api.emit(**rec)


def install(api) -> None:
    hook = Hook(api)
    hook.patch_clocks()
    api.on_phase(hook.phase)
    api.on_torch(hook.events)
    api.on_stage_end(hook.stage_end)
