"""The search probe's hook in the worker (loaded by name: ProbeInfo.hook). It arms during each `first_call:` and
`tune:` phase, and sends per phase what watch.py recorded: the searches that ran and the state they left.

Clocks: any the submission's own code calls directly, in any thread: time's clocks (process and thread time
included), timeit's default_timer (bound once timeit is imported, maybe before this hook: patched there too),
timeit's and torch.utils.benchmark's timing calls, CUDA events' elapsed_time, and triton's do_bench. A library's own
reads (torch.compile's, timeit's inner loop) are not the submission's and never count. Between two reads of a frame
not yet known to time work, a profile function on that thread notes whether anything of the submission's ran
(between.py): one line read again and again with nothing between is a wait, with a candidate between a timing loop.

In a tuning run (stage "tune") it also wraps each functools cache of the submission's module, and of its
classes, to record what each argument tuple returned (a C cache cannot list its contents), and records what each
search's function returned for its arguments (returns.py); at the stage's end it sends the final value of every
place a phase changed, as source text where a literal can hold it, and of each dict the scan found a search keeping
its result in (api.args["dicts"], from the plan). Nothing it wraps changes what the submission
computes.
"""
from __future__ import annotations

import functools
import sys
import threading
import time

from probes.search import kept, processes
from probes.search.between import Between
from probes.search.places import _places, added, changed
from probes.search.returns import Returns, judged
from probes.search.watch import CLOCKS, Search, dict_fields, literal_text

ARMED = ("first_call:", "tune:")
# timing calls that time a whole candidate each (a read before and after inside them): module -> owner -> names
TIMERS = {"timeit": {"": ("timeit", "repeat"), "Timer": ("timeit", "repeat", "autorange")},
          "torch.utils.benchmark": {"Timer": ("timeit", "blocked_autorange", "adaptive_autorange")},
          "triton.testing": {"": ("do_bench", "do_bench_cudagraph")}}


class Hook:
    def __init__(self, api):
        self.api = api
        self.lock = threading.RLock()
        self.local = threading.local()               # .busy: this thread is inside the hook's own record
        self.search: Search | None = None
        self.before: dict | None = None
        self.returns = Returns(self._returned)
        self.returned: list[dict] = []               # tuning: what search functions returned in this phase
        self.touched: dict[str, str] = {}          # tuning: path -> kind, over every phase
        self.added: dict[str, dict] = {}            # tuning: mapping path -> {key text: (value text, why)}
        self.calls: dict[str, dict] = {}            # tuning: cache path -> {args: result}
        self.methods: set[str] = set()              # tuning: the cache paths that are methods (keyed without self)
        self.wrapped = False
        self.case = None
        # the clock wrappers share one code object: a read between two reads is no work
        self.between = Between(api, self.clock(time.perf_counter, "", 0).__code__)
        self.bridge = processes.Bridge(self)        # install() gives it the process's, which starts workers

    # -- clocks --------------------------------------------------------------------------------------------
    def clock(self, fn, kind: str, weight: float):
        hook = self

        @functools.wraps(fn)
        def read(*a, **k):
            if hook.search is not None and not getattr(hook.local, "busy", False):
                caller = sys._getframe(1)
                if caller.f_code.co_filename.startswith(hook.api.submission_dir):
                    hook.local.busy = True
                    try:
                        worked = hook.between.stop()
                        with hook.lock:
                            undecided = hook.search is not None and \
                                hook.search.read(kind, weight, caller, threading.get_ident(), worked)
                        if undecided:        # is the next read of its frame a wait's, or a timing loop's?
                            hook.between.watch()
                    except Exception:  # noqa: BLE001 - the probe's record never breaks the submission's call
                        pass
                    finally:
                        hook.local.busy = False
            return fn(*a, **k)
        read.__wrapped_clock__ = True
        return read

    def patch_clocks(self) -> None:
        for name in CLOCKS:
            if hasattr(time, name):
                setattr(time, name, self.clock(getattr(time, name), f"time.{name}", 0.5))
        for module, owners in TIMERS.items():
            self.api.on_import(module, lambda m, owners=owners, module=module: self._timers(m, module, owners))

    def _timers(self, mod, module: str, owners: dict) -> None:
        if module == "timeit" and not getattr(mod.default_timer, "__wrapped_clock__", False):
            mod.default_timer = self.clock(mod.default_timer, "timeit.default_timer", 0.5)
        for owner, names in owners.items():
            holder = getattr(mod, owner, None) if owner else mod
            for name in names:
                fn = getattr(holder, name, None) if holder is not None else None
                if fn is not None and not getattr(fn, "__wrapped_clock__", False):
                    label = f"{module}.{owner + '.' if owner else ''}{name}"
                    setattr(holder, name, self.clock(fn, label, 1))

    def events(self, torch) -> None:
        """CUDA events' elapsed_time, patched on the class once torch is up (before the guard notes it): the
        submission's events are made from it however it imported it."""
        ev = getattr(getattr(torch, "cuda", None), "Event", None)
        if ev is not None and hasattr(ev, "elapsed_time") and not hasattr(ev.elapsed_time, "__wrapped__"):
            ev.elapsed_time = self.clock(ev.elapsed_time, "cuda.Event.elapsed_time", 1)

    # -- other processes ------------------------------------------------------------------------------------------
    def remote(self, chain: list, msg: dict) -> None:
        """A read a worker process sent (processes.py): another thread's candidate, under the phase's waiting frames."""
        with self.lock:
            if isinstance(self.search, Search):
                self.search.read(msg["kind"], msg["weight"], None, (msg["pid"], msg["thread"]), msg.get("worked"),
                                 chain=chain)

    def forked(self, upstream) -> None:
        """In a forked process: nothing of the parent's phase is its own; its reads go up the pipe (or nowhere)."""
        self.lock, self.local, self.search = threading.RLock(), threading.local(), upstream
        self.between.local = threading.local()

    # -- phases --------------------------------------------------------------------------------------------
    def phase(self, what: str, name: str, fields: dict) -> None:
        if not name.startswith(ARMED):
            return
        mod = sys.modules.get("submission")
        self.bridge.drain()     # the reads workers sent before this: a phase ends with its last candidate's
        with self.lock:
            if what == "begin":
                tune = name.startswith("tune:")
                if tune and mod is not None and not self.wrapped:
                    self.wrapped = True
                    self._record_caches(mod)
                self.search = Search(self.api, name, on_search=self.returns.arm if tune else None)
                self.before = _places(mod) if mod is not None else None
                self.case, self.returned = fields.get("case"), []
                return
            if not isinstance(self.search, Search):
                return
            search, self.search = self.search, None
        found = search.found()
        after = _places(mod) if mod is not None and self.before is not None else {}
        left = changed(self.before, after, search.linked) if after else []
        for rec in left:
            self.touched[rec["path"]] = rec["kind"]
        if name.startswith("tune:") and after:
            for path, pairs in added(self.before, after).items():
                self.added.setdefault(path, {}).update(kept.entry_texts(pairs))
        returned = judged(self.returned, found, search.linked)
        waits = search.waits()      # what a report says is no search: the reads that were waits
        if found or left or waits:
            self.api.emit(what="phase", phase=name, case=self.case, ok=fields.get("ok"),
                          searches=found, changed=left, returned=returned, waits=waits)

    def _returned(self, frame, key, value) -> None:
        """An armed search function returned: its key and its value as source text, where literals hold them."""
        code = frame.f_code
        key_text, _ = literal_text(key)
        text, why = literal_text(value)
        if len(self.returned) < 200:
            self.returned.append({"func": code.co_name, "def_line": code.co_firstlineno, "key": key_text,
                                  "text": text, "error": why, "value": value if text else None})

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
        for name in self.api.args.get("dicts") or ():     # the scan's dicts, which the plan hands the tuning run
            # a slot each: kept apart from the runner's cap on the stage's many `searching` events
            self.api.emit(what="memo", slot=f"memo:{name}", **dict_fields(name, getattr(mod, name, None)))
        places = _places(mod) if mod is not None else {}
        for path, kind in sorted(self.touched.items()):
            value = self.calls.get(path) if kind == "cache" else (places.get(path) or (None, None, None))[2]
            rec = kept.record(path, kind, value, self.added.get(path), path in self.methods)
            self.api.emit(slot=f"kept:{path}", **rec)


def install(api) -> None:
    hook = Hook(api)
    hook.patch_clocks()
    hook.bridge = processes.bridge(hook)
    api.on_phase(hook.phase)
    api.on_torch(hook.events)
    api.on_stage_end(hook.stage_end)
