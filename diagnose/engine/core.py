"""The diagnosis, end to end: scan -> baseline and probe runs -> bisector -> solo confirmations.

The engine decides what to run and in what order; a Runner (runner/__init__.py) runs it. Work is
scheduled a stage at a time, so that the verdict comes first:

  priority 0  the baseline, and solo confirmations (nothing else runs beside those)
  priority 1  every single toggle, up to the stage where the baseline failed (removing toggles launched first)
  priority 2  the bisector's combination runs: with every suspect out, and the one the source calls likely,
              beside the baseline where the source gives two removers (else with the late toggles); the
              rest as the search asks
  priority 3  the leading fix's stages past the failure (engine/fix_order.py): the variant the choice of fix
              takes, whose stages the full report waits for; never kept off a worker
  priority 4  the later stages of the other variants that got past the failure: timing them (while the
              baseline runs, any stage it has not reached; released when it ends, and kept off half the
              workers until the causes stand; past their steady state, parked until the choice reaches them),
              and the toggles that decide no cause (the warm container)

No file is written here: the observer's on_change hears the session whenever it changed (the CLI saves it),
so a failure or an interrupt halfway loses nothing that had finished.
"""
from __future__ import annotations

import threading
import time

from diagnose.analysis.causes import bisector, fix_choice
from diagnose.engine.conclusions import Conclusions
from diagnose.engine.observer import Observer
from diagnose.engine.planning import Planner
from diagnose.engine.preflight import preflight, start_checked
from diagnose.engine.runs import RunPool
from diagnose.errors import BadInput, CannotStart
from diagnose.runs import device
from diagnose.runs.runner import Runner
from diagnose.runs.settings import Settings
from diagnose.session import Role, Run, Session
from diagnose.source.submission import Submission
from probes.door import deciding, infos, scan


class Engine:
    """The diagnosis of one submission: a RunPool runs what the Planner plans; Conclusions, the one owner of what
    the session concludes, draws the verdict, causes and fix from it and settles the session once per change. The
    `observer` (engine/observer.py) hears every stage and run, the verdict and the causes once each is decided,
    and every change of the session."""

    def __init__(self, sub: Submission, session: Session, settings: Settings, runner: Runner,
                 observer: Observer | None = None, stop: threading.Event | None = None):
        self.sub, self.session, self.settings, self.runner = sub, session, settings, runner
        observer = observer or Observer()
        self.pool = RunPool(session, sub.source, settings, runner, stop=stop, on_save=lambda s: self.concl.changed(),
                            observer=observer)
        self.pool.order.active = True      # the leading fix's stages first, the alternatives' where the choice reaches
        self.planner = Planner(self.pool, sub, scan(sub.source, sub.tree))
        self.concl = Conclusions(self.pool, observer)
        self.late: dict = {}        # the probes' plans from the baseline's evidence (and a tuning run's)

    def can_judge(self) -> bool:
        """False for a multi-GPU problem on a machine with too few GPUs: its verdict is then settled, with no run."""
        need, have = self.settings.task.world_size, device.gpu_count()
        if need <= 1 or need <= have:
            return True
        self.concl.cannot_judge(need, have)
        return False

    def ended(self, stopped_by: int | None = None) -> None:
        """After the diagnosis: our own failures on its runs, and the signal that stopped it (if one did), settled
        into the verdict."""
        self.concl.own_failures(self.errors)
        if stopped_by:
            self.concl.stopped(stopped_by)

    def claims(self) -> list:
        """What the session states as it now stands, settled once per change: for the CLI to write and print."""
        return self.concl.claims()

    @property
    def errors(self) -> list[str]:
        return self.pool.errors

    @property
    def sources(self) -> dict[str, str]:
        return self.pool.sources

    def diagnose(self) -> Session:
        """The diagnosis as a short script (_script); whatever happens, the runner is closed and the session
        saved, and a bug of ours still concludes on the runs that finished."""
        self.concl.t0 = time.monotonic()
        # Causes before costs: until the causes stand, fix costing (the later stages) takes at most half the
        # workers, so the late toggles and the combinations, which are planned only once the baseline has
        # ended, find a worker free at once (on Round 9 they had waited 20 s behind benchmark stages).
        self.pool.open(reserve=max(2, self.settings.jobs // 2))
        try:
            return self._script()
        except (BadInput, CannotStart):
            raise
        except Exception:  # noqa: BLE001 - a bug of ours: keep what finished, say so, conclude on it
            return self._salvage()
        finally:
            self.pool.drop_parked("not run: the diagnosis ended first")    # a stop or a bug of ours ended it early
            self.pool.close()

    def _script(self) -> Session:
        """baseline and early toggles → verdict → late plans and tuning → combinations → causes → confirm."""
        s, pool, concl = self.session, self.pool, self.concl
        if not preflight(pool, concl):
            return concl.finish()
        base = self._start()
        if not pool.wait(base):
            pool.release_held()
            return concl.finish()
        concl.say_early("verdict")
        if pool.moot.is_set():
            # Every variant would stop where the baseline did: running them only costs the user time.
            pool.release_held()
            pool.wait_all()
            s.complete = not pool.stop.is_set()
            return concl.finish()
        removers, singles = self._plan_late(base)
        if not pool.wait_for(lambda: self._causes_settled(singles, removers, base)):
            return concl.finish()
        # a probe's edits that each took part of the time away, tried together before the search reads the singles
        doubtful = self.planner.join_doubts(self.late, base)
        if doubtful:
            concl.confirm(doubtful)
        joined = self.planner.within(self.late, base)
        if joined and not pool.wait_for(lambda: all(pool.decided(r) for r in joined)):
            return concl.finish()
        if self.settings.bisect:
            fails = self.planner.fails_for(removers)
            bisector.minimal_set(s, list(removers), fails=fails,
                            prefetch=lambda subsets: [fails(k, wait=False) for k in subsets])
            self.planner.verify_together(removers)
        concl.say_early("cause")
        pool.set_reserve(0)
        pool.wait_all()
        concl.conclude()
        if self.settings.confirm:
            for _ in range(2):    # a confirmation can change which runs the conclusions rest on
                todo = fix_choice.doubtful_evidence(s)
                if not todo or pool.stop.is_set():
                    break
                concl.confirm([r for r in todo if not pool.order.holds(r.id)])
                concl.conclude()
        # a confirmation that took the leading fix's pass away moves the choice on: the next one's stages run first
        pool.wait_all()
        pool.drop_parked()
        concl.conclude()
        s.complete = not pool.stop.is_set()
        return concl.finish()

    def _start(self) -> Run:
        """The baseline, its repeats, and every toggle the source alone can plan, launched at once."""
        pool, planner = self.pool, self.planner
        base = start_checked(pool, lambda: pool.launch(Role.BASELINE, None, None, self.sub.source))
        if self.settings.probes == ():
            pool.release_held()
        for rep in range(1, self.settings.repeat):
            pool.launch(Role.REPEAT, None, "repeat", self.sub.source, rep=rep)
        early = planner.plan(None)
        planner.launch_plan(early)
        planner.record_plans(early)
        removers = planner.removers(early)
        if self.settings.bisect and len(removers) >= 2:
            # Every search asks first for the run with all suspects out, and it needs no toggle's answer: started
            # now, it is ready when the singles are (a baseline that passes stops it after its first stage).
            fails = planner.fails_for(removers)
            fails([], wait=False)
            for keep in planner.likely(early, removers):
                fails(keep, wait=False)
        return base

    def _plan_late(self, base: Run) -> tuple[dict, list[Run]]:
        """Every probe planned again from the baseline (a tuning run first where one needs it), the late
        toggles launched, and the combinations the search will most likely ask for started beside them.
        Returns the suspects' removing toggles and the single toggle runs the causes wait for: those of the
        probes that can fix or take part in the search (a warm container can do neither)."""
        s, planner = self.session, self.planner
        late = self.late = planner.plan(base)
        planner.record_plans(late)
        planner.launch_plan(late)       # identical variants are not run again
        tuned = planner.tune(late, base)
        if tuned:
            late.update(tuned)
            planner.record_plans(late)
            planner.launch_plan(tuned)
        removers = planner.removers(late)
        singles = [r for r in list(s.runs) if r.role == Role.SINGLE and deciding(r.probe)]
        try:
            if self.settings.bisect and len(removers) >= 2 and base.failed_stage is not None:
                # Start the combinations the search will most likely ask for now, beside the late toggles:
                # all suspects out (it needs no toggle's answer), and the ones that already fixed it alone
                # kept in. A guess made while some toggles still run costs one run if it is wrong (the
                # search then asks for the right one); waiting for them had cost Round 9 20-40 s.
                fails = planner.fails_for(removers)
                fails([], wait=False)
                known = bisector.fixing_probes(s, base)
                if len(known) >= 2:
                    fails(known, wait=False)
        finally:
            # Only now may the fix-costing stages queue: released before the combinations were submitted,
            # a free worker took them first (a loaded CI machine ran every leaderboard stage ahead of them).
            self.pool.release_held()
        return removers, singles

    def _causes_settled(self, singles: list[Run], removers: dict, base: Run) -> bool:
        """Can no single still running change the causes? Each has decided, or is an alternative (not its
        suspect's removing toggle) of a suspect another toggle already showed to fix the failure: that suspect
        is a fixing one either way, and the alternative only costs a fix."""
        pending = [r for r in singles if not self.pool.decided(r)]
        if not pending:
            return True
        fixing = set(bisector.fixing_probes(self.session, base))     # once per look, not once per run
        return all(r.probe in removers and r.toggle != removers[r.probe].label and r.probe in fixing
                   for r in pending)

    def _salvage(self) -> Session:
        """A bug of ours: wait for the runs in flight, and conclude on them; if concluding is what failed, the
        runs' verdict alone, with no causes."""
        s, pool = self.session, self.pool
        pool.fail()
        pool.wait_all()
        try:
            return self.concl.finish()
        except Exception:  # noqa: BLE001 - concluding is what failed: no causes, the runs' verdict only
            pool.fail()
            self.concl.salvaged()
            return s


def probe_table() -> list[dict]:
    return [{"name": i.name, "suspect": i.suspect, "finds": i.finds, "toggles": i.toggles} for i in infos()]


__all__ = ["Engine", "probe_table"]
