"""The diagnosis, end to end: scan -> baseline and probe runs -> bisector -> solo confirmations.

The engine decides what to run and in what order; a Runner (runner/__init__.py) runs it. Work is
scheduled a stage at a time, so that the verdict comes first:

  priority 0  the baseline, and solo confirmations (nothing else runs beside those)
  priority 1  every single toggle, up to the stage where the baseline failed
  priority 2  the bisector's combination runs: the two most likely ones with the late toggles, the rest as
              the search asks
  priority 3  the later stages of variants that got past the failure: verifying a fix, timing it (while the
              baseline runs, any stage it has not reached; held until every toggle is launched, and
              kept off half the workers until the causes stand)

No file is written here: `on_save(session)` is called whenever the session changed (the CLI saves it),
so a failure or an interrupt halfway loses nothing that had finished.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from diagnose.analysis import bisector, fix_choice, summary
from diagnose.engine.conclusions import Conclusions
from diagnose.engine.planning import Planning
from diagnose.engine.preflight import Preflight
from diagnose.engine.runs import RunPool, _State
from diagnose.engine.scheduler import Scheduler
from diagnose.errors import BadInput
from diagnose.runs.runner import Runner
from diagnose.session import Role, Run, Session
from diagnose.source.scan import scan_source
from diagnose.source.submission import Submission
from probes import REGISTRY


@dataclass
class Options:
    probes: list[str] | None = None      # None: every probe whose suspect is present; []: none
    jobs: int = 1
    repeat: int = 1
    gpu: bool = False
    bisect: bool = True
    confirm: bool = True                 # rerun alone what a time-based conclusion rests on
    preflight: bool = False              # check the problem's reference alone before any stage
    solo_stages: tuple = ()              # stages that run with nothing beside them (a problem evaluator's timing)
    problem: str = ""                    # the problem folder, for messages
    gpus_for: list = field(default_factory=list)   # the GPUs the problem is set for
    rules: list = field(default_factory=list)      # what the problem's evaluator sets ([{name, value, file, line}])
    cases: list = field(default_factory=list)      # the task's test then benchmark cases (a warm-up's shapes)


class Engine(RunPool, Planning, Conclusions, Preflight):
    def __init__(self, sub: Submission, session: Session, stages: list[str], opts: Options, runner: Runner,
                 on_save=None, stop: threading.Event | None = None, on_run_done=None, on_stage=None,
                 on_verdict=None):
        self.sub, self.session, self.stages, self.opts, self.runner = sub, session, stages, opts, runner
        self.on_save = on_save or (lambda s: None)
        self.on_run_done = on_run_done or (lambda r: None)
        self.on_stage = on_stage or (lambda r: None)
        self.on_verdict = on_verdict or (lambda s, what: None)   # the verdict, then the causes, once each decided
        self._t0 = time.monotonic()
        self.stop = stop or threading.Event()
        self.sources: dict[str, str] = {}   # run id -> the variant's full source (for --fix)
        self.lock = threading.RLock()
        self._ids = itertools.count()
        self._states: dict[str, _State] = {}
        self._by_key: dict[str, Run] = {}
        self._launched: set[tuple] = set()
        self._held: list = []                      # LATER stages queued before every toggle was launched
        self._all_launched = threading.Event()
        self._changed = threading.Condition(self.lock)
        self.scan = scan_source(sub.source, sub.tree)
        self.sched: Scheduler | None = None
        self.errors: list[str] = []          # the tool's own failures: reported, never taken as evidence
        self._quiet = False                  # nothing is saved while the problem folder is still being checked
        self._moot = threading.Event()       # the baseline showed this machine cannot judge: no run can tell

    def save(self) -> None:
        with self.lock:
            if not self._quiet:
                self.on_save(self.session)

    # -- runs ------------------------------------------------------------------------------------------
    # -- planning --------------------------------------------------------------------------------------
    # -- the diagnosis ---------------------------------------------------------------------------------
    def diagnose(self) -> Session:
        """The diagnosis as a short script (_script); whatever happens, the runner is closed and the session
        saved, and a bug of ours still concludes on the runs that finished."""
        self._t0 = time.monotonic()
        self.sched = Scheduler(self.opts.jobs, self.stop)
        # Causes before costs: until the causes stand, fix costing (the later stages) takes at most half the
        # workers, so the late toggles and the combinations, which are planned only once the baseline has
        # ended, find a worker free at once (on Round 9 they had waited 20 s behind benchmark stages).
        self.sched.set_reserve(max(2, self.opts.jobs // 2))
        try:
            return self._script()
        except BadInput:
            raise
        except Exception:  # noqa: BLE001 - a bug of ours: keep what finished, say so, conclude on it
            return self._salvage()
        finally:
            self.sched.close()
            kept = self.runner.close()
            if kept:
                self.session.notes.append(f"run directories kept in {kept}")
            self.save()

    def _script(self) -> Session:
        """baseline and early toggles → verdict → late plans and tuning → combinations → causes → confirm."""
        s = self.session
        if self.opts.preflight and not self._preflight():
            return self._finish()
        base = self._start()
        if not self._wait(self._states[base.id].done):
            self._release_held()
            return self._finish()
        self._say_early("verdict")
        if self._moot.is_set():
            # Every variant would stop where the baseline did: running them only costs the user time.
            self._release_held()
            self._wait_for(lambda: all(st.done.is_set() for st in self._states.values()))
            s.complete = not self.stop.is_set()
            return self._finish()
        removers, singles = self._plan_late(base)
        if not self._wait_for(lambda: all(self._decided(r) for r in singles)):
            return self._finish()
        if self.opts.bisect:
            bisector.search(s, list(removers), fails=lambda keep: self.fails_with(keep, removers),
                            prefetch=lambda subsets: [self.fails_with(k, removers, wait=False) for k in subsets])
        self._say_early("cause")
        self.sched.set_reserve(0)
        self._wait_for(lambda: all(st.done.is_set() for st in self._states.values()))
        self._conclude()
        if self.opts.confirm:
            for _ in range(2):    # a confirmation can change which runs the conclusions rest on
                todo = fix_choice.doubtful_evidence(s)
                if not todo or self.stop.is_set():
                    break
                self._confirm(todo)
                self._conclude()
        s.complete = not self.stop.is_set()
        return self._finish()

    def _start(self) -> Run:
        """The baseline, its repeats, and every toggle the source alone can plan, launched at once."""
        base = self.launch(Role.BASELINE, None, None, self.sub.source)
        if self.opts.probes == []:
            self._all_launched.set()
        for rep in range(1, self.opts.repeat):
            self.launch(Role.REPEAT, None, "repeat", self.sub.source, rep=rep)
        early = self.plan(None)
        self._launch_plan(early)
        self._record_plans(early)
        return base

    def _plan_late(self, base: Run) -> tuple[dict, list[Run]]:
        """Every probe planned again from the baseline (a tuning run first where one needs it), the late
        toggles launched, and the combinations the search will most likely ask for started beside them.
        Returns the suspects' removing toggles and the single toggle runs the causes wait for."""
        s = self.session
        late = self.plan(base)
        self._record_plans(late)
        self._launch_plan(late)       # identical variants are not run again
        tuned = self.tune(late, base)
        if tuned:
            late.update(tuned)
            self._record_plans(late)
            self._launch_plan(tuned)
        removers = self._removers(late)
        singles = [r for r in list(s.runs) if r.role == Role.SINGLE]
        try:
            if self.opts.bisect and len(removers) >= 2 and base.failed_stage is not None:
                # Start the combinations the search will most likely ask for now, beside the late toggles:
                # all suspects out (it needs no toggle's answer), and the ones that already fixed it alone
                # kept in. A guess made while some toggles still run costs one run if it is wrong (the
                # search then asks for the right one); waiting for them had cost Round 9 20-40 s.
                self.fails_with([], removers, wait=False)
                known = bisector.fixing_probes(s, base)
                if len(known) >= 2:
                    self.fails_with(known, removers, wait=False)
        finally:
            # Only now may the fix-costing stages queue: released before the combinations were submitted,
            # a free worker took them first (a loaded CI machine ran every leaderboard stage ahead of them).
            self._release_held()
        return removers, singles

    def _salvage(self) -> Session:
        """A bug of ours: wait for the runs in flight, and conclude on them; if concluding is what failed, the
        runs' verdict alone, with no causes."""
        import traceback
        s = self.session
        self.errors.append(traceback.format_exc())
        self._wait_for(lambda: all(st.done.is_set() for st in self._states.values()))
        try:
            return self._finish()
        except Exception:  # noqa: BLE001 - concluding is what failed: no causes, the runs' verdict only
            self.errors.append(traceback.format_exc())
            s.causes, s.cleared, s.inconclusive, s.fix = [], [], [], None
            s.verdict = summary.verdict(s, interrupted=self.stop.is_set())
            s.verdict.note = "diagnose failed while concluding (a bug in diagnose): no causes are stated"
            return s

def probe_table() -> list[dict]:
    return [{"name": m.INFO.name, "suspect": m.INFO.suspect, "finds": m.INFO.finds, "toggles": m.INFO.toggles}
            for m in REGISTRY]


__all__ = ["Engine", "Options", "probe_table"]
