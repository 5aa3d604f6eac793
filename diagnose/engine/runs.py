"""Runs and their scheduling: launching a run (or answering from an identical one), queueing its stages by
priority, executing them on the runner, and waiting on what has decided.
"""
from __future__ import annotations

import hashlib
import itertools
import threading

from diagnose.analysis.causes.fix_choice import NOT_NEEDED
from diagnose.engine.fix_order import FixOrder
from diagnose.engine.observer import Muting, Observer
from diagnose.engine.run_state import LATER, LEAD, MOOT, RunState, job_for, priority
from diagnose.engine.scheduler import Scheduler
from diagnose.runs.runner import DeviceUp, Job, Runner
from diagnose.runs.settings import Settings
from diagnose.session import Role, Run, Session
from diagnose.source.edits import edited_lines, unified_diff
from diagnose.status import ENDS_RUN, Status
from probes.base import WARM


class RunPool:
    """Runs and their scheduling: launch (or answer from an identical run), wait, decided. The engine's
    planning, conclusions and preflight, and bisect's edit search, all work through this API; its state is
    its own. `on_save(session)` is called whenever the session changed (nothing is saved while muted); the
    observer (engine/observer.py) hears each stage and each run that ended."""

    def __init__(self, session: Session, source: str, settings: Settings, runner: Runner,
                 stop: threading.Event | None = None, on_save=None, observer: Observer | None = None):
        self.session, self.source, self.settings, self.runner = session, source, settings, runner
        self.stop = stop or threading.Event()
        self.on_save = on_save or (lambda s: None)
        self.observer = Muting(observer or Observer())      # muted while a run's start is still being checked
        self.sources: dict[str, str] = {}   # run id -> the variant's full source (for --fix)
        self.errors: list[str] = []         # the tool's own failures: reported, never taken as evidence
        self.lock = threading.RLock()
        self.moot = threading.Event()       # the baseline showed this machine cannot judge: no run can tell
        self._ids = itertools.count()
        self._states: dict[str, RunState] = {}
        self._by_key: dict[str, Run] = {}
        self._held: list = []                      # LATER stages queued before every toggle was launched
        self._all_launched = threading.Event()
        self._await_base: list = []                # combinations past their first stage, until the baseline ends
        self._changed = threading.Condition(self.lock)
        self.sched: Scheduler | None = None
        self.base_device: DeviceUp | None = None     # see run_state.job_for
        self.order = FixOrder(session, settings)            # the leading fix first, the alternatives parked

    # -- the pool's life -------------------------------------------------------------------------------
    def open(self, reserve: int = 0) -> None:
        """Start the workers; `reserve` of them are kept from fix costing until `set_reserve(0)`."""
        self.sched = Scheduler(self.settings.jobs, self.stop, background=LATER)
        self.sched.set_reserve(reserve)

    def set_reserve(self, n: int) -> None:
        self.sched.set_reserve(n)

    def close_workers(self) -> None:
        """Stop the workers once what they run has ended (the runner stays: bisect's caller ends it)."""
        if self.sched is not None:
            self.sched.close()

    def close(self) -> None:
        """Stop the workers, end the runner, and save; the runner's kept directories are noted."""
        self.close_workers()
        kept = self.runner.close()
        if kept:
            self.session.notes.append(f"run directories kept in {kept}")
        self.save()

    def save(self) -> None:
        with self.lock:
            if not self.observer.muted:
                self.on_save(self.session)

    def mute(self, keep: bool = True) -> None:
        """Nothing saved or heard until unmute(); what the observer missed is handed on then (`keep`) or dropped."""
        self.observer.mute(keep)

    def unmute(self) -> None:
        self.observer.unmute()
        self.save()

    def fail(self) -> None:
        """A bug of ours: record it (reported, never evidence)."""
        import traceback
        self.errors.append(traceback.format_exc())

    def launch(self, role: Role, probe: str | None, label: str | None, source: str, switches: tuple = (),
               rep: int = 0, stages: list[str] | None = None, confirms: str | None = None,
               removed: tuple = (), reuse: bool = False, hook_args: dict | None = None, full: bool = False) -> Run:
        """Start a run (its first stage is queued at once), or answer from an identical earlier one.
        Identical variants (same source, switches and repeat number) are measured once; a confirmation is
        never deduplicated: it is a rerun on purpose."""
        sha = hashlib.sha256(source.encode()).hexdigest()
        key = f"{sha}|{','.join(sorted(switches))}|{rep}" + ("|full" if full else "")
        with self.lock:
            fresh = role in (Role.CONFIRM, Role.REFERENCE, Role.TUNING)   # on purpose: never shared
            prior = None if fresh else self._by_key.get(key)
            if prior is not None and reuse:
                return prior
            run = Run(id=f"r{next(self._ids)}", probe=probe, toggle=label, role=role, source_sha=sha[:12],
                      variant=None if source == self.source else unified_diff(self.source, source),
                      switches={s: True for s in switches} | ({"repeat": rep} if rep else {}),
                      confirms=confirms, removed=list(removed),
                      watched=[] if source == self.source else edited_lines(self.source, source))
            self.session.runs.append(run)
            self.sources[run.id] = source
            if prior is not None:
                run.note = f"identical variant: measured once, as {prior.id}"
                self._states[run.id] = st = RunState(run, source, [], prior=prior.id)
                threading.Thread(target=self._mirror, args=(run, prior), daemon=True).start()
                return run
            if not fresh:
                self._by_key[key] = run
            warm_from = self.session.baseline.id if WARM in switches and self.session.baseline else None
            st = RunState(run, source, list(stages or self.settings.stages), warm_from=warm_from,
                          hook_args=dict(hook_args or {}), full=full)
            self._states[run.id] = st
        self._advance(st)
        return run

    def _mirror(self, run: Run, prior: Run) -> None:
        self.wait(prior, parked=False)
        with self.lock:
            run.stages, run.outcome, run.solo = prior.stages, prior.outcome, prior.solo
            self._states[run.id].done.set()
            self._changed.notify_all()
        self.observer.on_run_done(run)
        self.save()

    def _priority(self, st: RunState, stage: str) -> int:
        return priority(st, stage, self.session, self.settings, self._all_launched.is_set(), self.order.leads)

    def _advance(self, st: RunState) -> None:
        """Queue the run's next stage, or mark it done (a parked one the choice now reaches goes first: before this
        run's end is told, so that whoever waits for every run sees it pending)."""
        for parked, job in self.order.due():
            self._submit(parked, job, self._priority(parked, job.stages[0]))
        run = st.run
        ended = any(s.status in ENDS_RUN for s in run.stages)
        if self.moot.is_set() and not ended and st.next < len(st.stages) and run.role != Role.BASELINE:
            run.outcome = run.outcome if run.stages else Status.SKIPPED
            run.note = run.note or MOOT
            st.next = len(st.stages)
        if ended or st.next >= len(st.stages) or self.stop.is_set():
            if run.role == Role.BASELINE and run.outcome == Status.NEEDS_GPU:
                self.moot.set()     # before this thread takes its next job: no variant starts after this
            if not run.stages and self.stop.is_set():
                run.outcome, run.note = Status.INTERRUPTED, "not run: the diagnosis was interrupted"
            with self.lock:
                st.done.set()
                self._changed.notify_all()
                waiting = []
                if run.role == Role.BASELINE:    # from now on a combination knows its stages at once
                    waiting, self._await_base = self._await_base, []
            self.observer.on_run_done(run)
            for w in waiting:
                self._advance(w)      # the combinations that waited to learn where the baseline failed
            if run.role == Role.BASELINE and self.sched is not None and self.sched.reserve > 0:
                # Fix costing may start now: the workers kept in reserve take the late toggles, which are planned
                # from the baseline next (waiting for that planning cost Round 9's fixes 8 s). With no worker in
                # reserve, they wait for the late toggles' launch instead.
                self.release_held()
            return
        stage = st.stages[st.next]
        base = self.session.baseline
        if run.role == Role.COMBINATION and base is not None and not st.full:
            with self.lock:     # the baseline's end is set under this lock, with the waiting list handed over
                base_done = self._states[base.id].done.is_set()
                if not base_done and st.next > 0:
                    # a combination only needs the stages up to the baseline's failure: started before the
                    # baseline ended, it waits after its first stage to learn which those are
                    self._await_base.append(st)
                    return
            failed = base.failed_stage
            if base_done and (failed is None or self.settings.index(stage) > self.settings.index(failed.name)):
                st.next = len(st.stages)
                return self._advance(st)
        st.next += 1
        if run.role == Role.BASELINE and self.base_device is None:
            self.base_device = DeviceUp()     # see run_state.job_for, and the start check (engine/preflight.py)
        job = job_for(st, stage, self.settings.solo_stages, self.base_device, self.settings.gpu)
        if self.order.parks(run, stage, st.full):
            return self.order.park(st, job)
        prio = self._priority(st, stage)
        with self.lock:
            if prio >= LATER and not self._all_launched.is_set():
                self._held.append((st, job))   # verdict first: these wait for the last toggles' launch
                return
        self._submit(st, job, prio)

    def _submit(self, st: RunState, job: Job, prio: int) -> None:
        # set where every stage is queued: one parked or held at first may lead by the time it is released
        if prio == LEAD:      # the full report waits for it: its timing sections go first, it yields no CPU
            job.lead, job.nice = True, 0
        fut = self.sched.submit(lambda: self._execute(st, job), prio, solo=job.solo)
        fut.add_done_callback(lambda f: f.cancelled() and self._cancelled(st))

    def release_held(self) -> None:
        with self.lock:
            self._all_launched.set()
            held, self._held = self._held, []
        for st, job in held:
            self._submit(st, job, self._priority(st, job.stages[0]))   # the baseline may have moved it

    def _promote_held(self) -> None:
        """The baseline reached another stage: the held stages it now makes deciding go ahead."""
        now, kept = [], []
        with self.lock:
            for st, job in self._held:
                prio = self._priority(st, job.stages[0])
                if prio < LATER:
                    now.append((st, job, prio))
                else:
                    kept.append((st, job))
            self._held = kept
        for st, job, prio in now:
            self._submit(st, job, prio)

    def _cancelled(self, st: RunState) -> None:
        st.run.note = st.run.note or "stopped: the diagnosis was interrupted"
        with self.lock:
            st.done.set()
            self._changed.notify_all()

    def _execute(self, st: RunState, job: Job) -> None:
        if self.moot.is_set() and st.run.role != Role.BASELINE:
            return self._advance(st)          # queued before the baseline said so: not run
        if job.solo:
            st.run.solo = True
        try:
            self.runner.execute(job, self._stage_done, self.stop)
        except Exception as e:  # noqa: BLE001 - a bug of ours: say so on the run, keep the rest going
            msg = f"{type(e).__name__}: {e}"
            self.fail()
            st.run.outcome, st.run.note = Status.INCOMPLETE, f"diagnose failed on this run (a bug in diagnose): {msg}"
            st.next = len(st.stages)
        finally:
            with self.lock:
                self._changed.notify_all()
            self._advance(st)

    def _stage_done(self, run: Run) -> None:
        if run.role == Role.BASELINE:
            self._promote_held()
        self.save()
        self.observer.on_stage(run)

    # -- waiting on what has decided -------------------------------------------------------------------
    def wait(self, run: Run, parked: bool = True) -> bool:
        """Until the run has ended, or (`parked`) has every stage the choice of fix needs of it; False when the
        diagnosis was stopped first."""
        while not self._states[run.id].done.wait(0.2):
            if self.stop.is_set():
                return False
            if parked and self.order.holds(run.id):
                return True
        return True

    def wait_for(self, predicate) -> bool:
        """Until `predicate()` holds (checked whenever a run changes); False when stopped first."""
        with self._changed:
            while not predicate():
                if self.stop.is_set():
                    return False
                self._changed.wait(0.2)
        return True

    def wait_all(self) -> bool:
        return self.wait_for(self.all_done)

    def done(self, run: Run) -> bool:
        return self._states[run.id].done.is_set()

    def all_done(self) -> bool:
        """Every run ended, or parked until the choice of fix reaches it (drop_parked ends those), or the identical
        variant of a parked one."""
        return all(st.done.is_set() or self.order.holds(st.prior or i) for i, st in self._states.items())

    def drop_parked(self, why: str = NOT_NEEDED) -> None:
        """The alternatives the choice of fix never reached: their parked stages end as not run, and `why`."""
        for st in self.order.drop(why):
            self._advance(st)

    def planned(self, run: Run) -> list[str]:
        """The stages the run was launched with."""
        return list(self._states[run.id].stages)

    def decided(self, run: Run) -> bool:
        """A single toggle has decided once it ended, or once it got past the baseline's failing stage."""
        st = self._states[run.id]
        if st.done.is_set():
            return True
        if st.prior is not None:    # measured once, as the prior: its stages arrive only when it has ended
            return self.decided(self.session.run(st.prior))
        base = self.session.baseline
        failed = base.failed_stage if base is not None and self._states[base.id].done.is_set() else None
        return failed is not None and any(s.name == failed.name and s.status not in ENDS_RUN for s in run.stages)
