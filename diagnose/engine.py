"""The diagnosis, end to end: scan -> baseline run -> probe plans -> variant runs -> bisector.

No file is written here: `on_save(session)` is called whenever the session changed (the CLI saves it),
so a failure or an interrupt halfway loses nothing that had finished. Runs go through a small thread
pool (--jobs); each run is its own child processes, and GPU timing is serialised by a lock file that
the children take (runner/stages.py), so overlapping runs do not disturb each other's steady state.
"""
from __future__ import annotations

import hashlib
import itertools
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from diagnose import bisector
from diagnose.edits import unified_diff
from diagnose.runner.stages import RunSettings, execute
from diagnose.scan import scan_source
from diagnose.session import FAILURES, Run, Session
from diagnose.submission import Submission
from probes import BY_NAME, REGISTRY
from probes.base import RUN, PlanContext, Toggle
from probes.cache import WARM

AFTER_BASELINE = ["recompile", "cache"]   # probes that read the baseline run's evidence


@dataclass
class Options:
    probes: list[str] | None = None      # None: every probe whose suspect is present
    jobs: int = 1
    repeat: int = 1
    gpu: bool = False
    gpus: list[str] = field(default_factory=list)
    bisect: bool = True


class Engine:
    def __init__(self, sub: Submission, session: Session, settings: RunSettings, opts: Options,
                 on_save=None, on_event=None, stop: threading.Event | None = None, on_run_done=None):
        self.sub, self.session, self.settings, self.opts = sub, session, settings, opts
        self.on_save, self.on_event = on_save or (lambda s: None), on_event
        self.stop = stop or threading.Event()
        self.on_run_done = on_run_done or (lambda r: None)
        self.sources: dict[str, str] = {}   # run id -> the variant's full source (for --fix)
        self.lock = threading.Lock()
        self._ids = itertools.count()
        self._by_key: dict[str, Run] = {}
        self._finished: dict[str, threading.Event] = {}   # run id -> set once its stages are final
        self._tmp = Path(tempfile.mkdtemp(prefix="diagnose-cache-"))
        self._gpu_cycle = itertools.cycle(opts.gpus or [None])
        self.scan = scan_source(sub.source, sub.tree)

    def save(self) -> None:
        with self.lock:
            self.on_save(self.session)

    # -- one run -------------------------------------------------------------------------------------
    def _settings_for(self) -> RunSettings:
        """Pin the run to its GPU; when runs overlap, give it that GPU's lock (timing takes it exclusively,
        every other GPU phase shared)."""
        gpu = next(self._gpu_cycle)
        s = RunSettings(**{**self.settings.__dict__})
        if gpu is not None:
            s.cuda_visible = gpu
        if self.opts.jobs > 1 or gpu is not None:
            s.timing_lock = str(self._tmp / f"gpu{gpu or 0}.lock")
        return s

    def run_variant(self, probe: str | None, label: str | None, source: str, switches: tuple = (),
                    rep: int = 0, stages: list[str] | None = None, reuse: bool = False) -> Run:
        """Run one variant, or answer from the earlier run of an identical one (same source, switches,
        rep). A duplicate gets a record of its own that says so; with `reuse` (the bisector asking again)
        the earlier run is returned as it is. Looking up and registering happen under one lock, so two
        threads never measure the same variant twice."""
        sha = hashlib.sha256(source.encode()).hexdigest()
        key = f"{sha}|{','.join(sorted(switches))}|{rep}"
        short_key = key + "|" + ",".join(stages) if stages else None
        with self.lock:
            # a full run answers a shortened one too; a shortened one answers only its own stages
            prior = self._by_key.get(key) or (self._by_key.get(short_key) if short_key else None)
            if prior is None or not reuse:
                run = Run(id=f"r{next(self._ids)}", probe=probe, toggle=label, source_sha=sha[:12],
                          variant=None if source == self.sub.source else unified_diff(self.sub.source, source),
                          switches={s: True for s in switches} | ({"repeat": rep} if rep else {}))
                self.session.runs.append(run)
                self.sources[run.id] = source
            if prior is None:
                self._by_key[short_key or key] = run
                self._finished[run.id] = threading.Event()
        if prior is not None:
            self._finished[prior.id].wait()   # an identical variant may still be running
            if reuse:
                return prior
            run.stages, run.outcome = prior.stages, prior.outcome
            run.note = f"identical variant: measured once, as {prior.id}"
            self.save()
            return run
        try:
            return self._execute(run, source, switches, probe, rep, stages)
        finally:
            self._finished[run.id].set()

    def _execute(self, run: Run, source: str, switches: tuple, probe, rep: int, stages) -> Run:
        cache = self._tmp / "baseline-cache" if WARM in switches or (probe is None and rep == 0) else None
        if self.stop.is_set():
            run.outcome, run.note = "skipped", "not run: the diagnosis was interrupted"
            return run
        settings = self._settings_for()
        if stages:
            settings.stages = stages
            run.note = f"stages {', '.join(stages)} only: enough to tell whether the failure comes back"
        execute(run, source, settings, cache_dir=cache, on_event=self.on_event,
                on_stage=lambda r: self.save(), stop=self.stop)
        self.on_run_done(run)
        self.save()
        return run

    # -- the diagnosis ---------------------------------------------------------------------------------
    def plan(self, baseline: Run | None, names: list[str]):
        ctx = PlanContext(self.sub.source, self.scan, self.opts.gpu, baseline)
        chosen = self.opts.probes or [m.INFO.name for m in REGISTRY]
        return {m.INFO.name: m.plan(ctx) for m in REGISTRY if m.INFO.name in chosen and m.INFO.name in names}

    def diagnose(self) -> Session:
        s = self.session
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.opts.jobs)) as pool:
                self.pool = pool
                base = [pool.submit(self.run_variant, None, None, self.sub.source, (), rep)
                        for rep in range(self.opts.repeat)]
                # Probes that need only the source start with the baseline; the rest need its evidence.
                early = self.plan(None, [n for n in BY_NAME if n not in AFTER_BASELINE])
                jobs = self._submit(early)
                baseline = base[0].result()
                late = self.plan(baseline, AFTER_BASELINE)
                merged = {**early, **late}
                plans = {m.INFO.name: merged[m.INFO.name] for m in REGISTRY if m.INFO.name in merged}
                s.probes = [{"name": n, "state": p.state, "why": p.why, "evidence": p.evidence,
                             "toggles": [t.label for t in p.toggles]} for n, p in plans.items()]
                self.save()
                jobs += self._submit(late)
                for j in jobs + base[1:]:
                    j.result()
                if self.opts.bisect and not self.stop.is_set():
                    removers = {n: next(t for t in p.toggles if t.removes) for n, p in plans.items()
                                if p.state == RUN and any(t.removes for t in p.toggles) and n != "cache"}
                    bisector.analyze(s, removers=list(removers), fails=lambda keep: self.fails_with(keep, removers),
                                     prefetch=lambda subsets: self._prefetch(subsets, removers))
                else:
                    bisector.analyze(s, removers=[], fails=None)
            s.complete = not self.stop.is_set()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self.save()
        return s

    def _submit(self, plans: dict) -> list:
        return [self.pool.submit(self.run_toggle, t, rep) for p in plans.values() if p.state == RUN
                for t in p.toggles for rep in range(self.opts.repeat if t.apply else 1)]

    def _prefetch(self, subsets: list[list[str]], removers: dict[str, Toggle]) -> None:
        """Run the bisector's next tests side by side; `fails_with` then finds them measured."""
        for f in [self.pool.submit(self.fails_with, keep, removers) for keep in subsets]:
            f.result()

    def run_toggle(self, t: Toggle, rep: int = 0) -> Run:
        source = t.apply(self.sub.source) if t.apply else self.sub.source
        return self.run_variant(t.probe, t.label, source, t.switches, rep)

    def fails_with(self, keep: list[str], removers: dict[str, Toggle]) -> bool:
        """The bisector's test: with only the suspects in `keep` left in, does the failure come back?"""
        source = self.sub.source
        removed = [n for n in removers if n not in keep]
        for n in removed:
            source = removers[n].apply(source)
        label = "keep " + " + ".join(keep) if keep else "all suspects removed"
        base = self.session.baseline
        # Only the stages up to the one that failed: they tell whether the failure comes back.
        failed = base.failed_stage
        stages = self.settings.stages[: self.settings.stages.index(failed.name) + 1] if failed else None
        run = self.run_variant("+".join(sorted(removed)) or None, label, source, stages=stages, reuse=True)
        if run.probe and "+" in run.probe:
            run.switches["combination"] = True
        return run.outcome == base.outcome and run.outcome in FAILURES + ("at_risk",)


def probe_table() -> list[dict]:
    return [{"name": m.INFO.name, "suspect": m.INFO.suspect, "finds": m.INFO.finds, "toggles": m.INFO.toggles}
            for m in REGISTRY]


__all__ = ["Engine", "Options", "probe_table", "BY_NAME"]
