"""The diagnosis, end to end: scan -> baseline and probe runs -> bisector -> solo confirmations.

The engine decides what to run and in what order; a Runner (runner/__init__.py) runs it. Work is
scheduled a stage at a time, so that the verdict comes first:

  priority 0  the baseline, and solo confirmations (nothing else runs beside those)
  priority 1  every single toggle, up to the stage where the baseline failed
  priority 2  the bisector's combination runs, as soon as the single toggles they depend on decided
  priority 3  the later stages of variants that got past the failure: verifying a fix, timing it

No file is written here: `on_save(session)` is called whenever the session changed (the CLI saves it),
so a failure or an interrupt halfway loses nothing that had finished.
"""
from __future__ import annotations

import hashlib
import itertools
import threading
import time
from dataclasses import dataclass, field

from diagnose import bisector, carried, comparison, evidence, fix_choice, summary
from diagnose.edits import edited_lines, unified_diff
from diagnose.errors import BadInput
from diagnose.runner import Job, Runner
from diagnose.scan import scan_source
from diagnose.scheduler import Scheduler
from diagnose.session import ENDS_RUN, NO_EVIDENCE, Role, Run, Session, Status, Verdict, Warning_
from diagnose.submission import Submission
from probes import BY_NAME, REGISTRY
from probes.base import RUN, PlanContext, Toggle
from probes.base import WARM

BASELINE, SINGLE, COMBINATION, LATER = 0, 1, 2, 3
MOOT = "not run: the baseline showed that this machine cannot judge the submission"


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


@dataclass
class _State:
    run: Run
    source: str
    stages: list[str]
    warm_from: str | None = None
    next: int = 0
    done: threading.Event = field(default_factory=threading.Event)


class Engine:
    def __init__(self, sub: Submission, session: Session, stages: list[str], opts: Options, runner: Runner,
                 on_save=None, stop: threading.Event | None = None, on_run_done=None, on_stage=None,
                 on_verdict=None):
        self.sub, self.session, self.stages, self.opts, self.runner = sub, session, stages, opts, runner
        self.on_save = on_save or (lambda s: None)
        self.on_run_done = on_run_done or (lambda r: None)
        self.on_stage = on_stage or (lambda r: None)
        self.on_verdict = on_verdict or (lambda s: None)   # once, as soon as the verdict and top cause are decided
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
    def launch(self, role: Role, probe: str | None, label: str | None, source: str, switches: tuple = (),
               rep: int = 0, stages: list[str] | None = None, confirms: str | None = None,
               removed: tuple = (), reuse: bool = False) -> Run:
        """Start a run (its first stage is queued at once), or answer from an identical earlier one.
        Identical variants (same source, switches and repeat number) are measured once; a confirmation is
        never deduplicated: it is a rerun on purpose."""
        sha = hashlib.sha256(source.encode()).hexdigest()
        key = f"{sha}|{','.join(sorted(switches))}|{rep}"
        with self.lock:
            fresh = role in (Role.CONFIRM, Role.REFERENCE)      # reruns and checks on purpose: never shared
            prior = None if fresh else self._by_key.get(key)
            if prior is not None and reuse:
                return prior
            run = Run(id=f"r{next(self._ids)}", probe=probe, toggle=label, role=role, source_sha=sha[:12],
                      variant=None if source == self.sub.source else unified_diff(self.sub.source, source),
                      switches={s: True for s in switches} | ({"repeat": rep} if rep else {}),
                      confirms=confirms, removed=list(removed),
                      watched=[] if source == self.sub.source else edited_lines(self.sub.source, source))
            self.session.runs.append(run)
            self.sources[run.id] = source
            if prior is not None:
                run.note = f"identical variant: measured once, as {prior.id}"
                self._states[run.id] = st = _State(run, source, [])
                threading.Thread(target=self._mirror, args=(run, prior), daemon=True).start()
                return run
            if not fresh:
                self._by_key[key] = run
            warm_from = self.session.baseline.id if WARM in switches and self.session.baseline else None
            st = _State(run, source, list(stages or self.stages), warm_from=warm_from)
            self._states[run.id] = st
        self._advance(st)
        return run

    def _mirror(self, run: Run, prior: Run) -> None:
        self._wait(self._states[prior.id].done)
        with self.lock:
            run.stages, run.outcome, run.solo = prior.stages, prior.outcome, prior.solo
            self._states[run.id].done.set()
            self._changed.notify_all()
        if not self._quiet:
            self.on_run_done(run)
        self.save()

    def _priority(self, st: _State, stage: str) -> int:
        role = st.run.role
        if role in (Role.BASELINE, Role.CONFIRM, Role.REFERENCE):
            return BASELINE
        if role == Role.COMBINATION:
            return COMBINATION
        base = self.session.baseline
        failed = base.failed_stage if base is not None else None
        if failed is None or self.stages.index(stage) <= self.stages.index(failed.name):
            return SINGLE
        return LATER

    def _advance(self, st: _State) -> None:
        """Queue the run's next stage, or mark it done."""
        run = st.run
        ended = any(s.status in ENDS_RUN for s in run.stages)
        if self._moot.is_set() and not ended and st.next < len(st.stages) and run.role != Role.BASELINE:
            run.outcome = run.outcome if run.stages else Status.SKIPPED
            run.note = run.note or MOOT
            st.next = len(st.stages)
        if ended or st.next >= len(st.stages) or self.stop.is_set():
            if run.role == Role.BASELINE and run.outcome == Status.NEEDS_GPU:
                self._moot.set()     # before this thread takes its next job: no variant starts after this
            if not run.stages and self.stop.is_set():
                run.outcome, run.note = Status.INTERRUPTED, "not run: the diagnosis was interrupted"
            with self.lock:
                st.done.set()
                self._changed.notify_all()
            if not self._quiet:
                self.on_run_done(run)
            return
        stage = st.stages[st.next]
        base = self.session.baseline
        if run.role == Role.COMBINATION and base is not None and self._states[base.id].done.is_set():
            failed = base.failed_stage    # a combination only needs the stages that tell
            if failed is None or self.stages.index(stage) > self.stages.index(failed.name):
                st.next = len(st.stages)
                return self._advance(st)
        st.next += 1
        solo = run.role == Role.CONFIRM or stage in self.opts.solo_stages
        job = Job(run=run, source=st.source, stages=[stage], watch=run.watched, warm_from=st.warm_from, solo=solo)
        prio = self._priority(st, stage)
        with self.lock:
            if prio >= LATER and not self._all_launched.is_set():
                self._held.append((st, job, prio))   # verdict first: these wait for the last toggles' launch
                return
        self._submit(st, job, prio)

    def _submit(self, st: _State, job: Job, prio: int) -> None:
        fut = self.sched.submit(lambda: self._execute(st, job), prio, solo=job.solo)
        fut.add_done_callback(lambda f: f.cancelled() and self._cancelled(st))

    def _release_held(self) -> None:
        with self.lock:
            self._all_launched.set()
            held, self._held = self._held, []
        for st, job, prio in held:
            self._submit(st, job, prio)

    def _cancelled(self, st: _State) -> None:
        st.run.note = st.run.note or "stopped: the diagnosis was interrupted"
        with self.lock:
            st.done.set()
            self._changed.notify_all()

    def _execute(self, st: _State, job: Job) -> None:
        if self._moot.is_set() and st.run.role != Role.BASELINE:
            return self._advance(st)          # queued before the baseline said so: not run
        if job.solo:
            st.run.solo = True
        try:
            self.runner.execute(job, self._stage_done, self.stop)
        except Exception as e:  # noqa: BLE001 - a bug of ours: say so on the run, keep the rest going
            import traceback
            msg = f"{type(e).__name__}: {e}"
            self.errors.append(traceback.format_exc())
            st.run.outcome, st.run.note = Status.INCOMPLETE, f"diagnose failed on this run (a bug in diagnose): {msg}"
            st.next = len(st.stages)
        finally:
            with self.lock:
                self._changed.notify_all()
            self._advance(st)

    def _stage_done(self, run: Run) -> None:
        self.save()
        if not self._quiet:
            self.on_stage(run)

    def _wait(self, event: threading.Event) -> bool:
        while not event.wait(0.2):
            if self.stop.is_set():
                return False
        return True

    def _wait_for(self, predicate) -> bool:
        with self._changed:
            while not predicate():
                if self.stop.is_set():
                    return False
                self._changed.wait(0.2)
        return True

    def _decided(self, run: Run) -> bool:
        """A single toggle has decided once it ended, or once it got past the baseline's failing stage."""
        st = self._states[run.id]
        if st.done.is_set():
            return True
        base = self.session.baseline
        failed = base.failed_stage if base is not None and self._states[base.id].done.is_set() else None
        return failed is not None and any(s.name == failed.name and s.status not in ENDS_RUN for s in run.stages)

    # -- planning --------------------------------------------------------------------------------------
    def plan(self, baseline: Run | None) -> dict:
        """Every chosen probe's plan. Before the baseline has run, only the probes that can start from
        the source plan (they start with the baseline); after it, every probe plans again from what the
        baseline did, and anything new it finds is launched then."""
        ctx = PlanContext(self.sub.source, self.scan, self.opts.gpu, baseline)
        chosen = self.opts.probes if self.opts.probes is not None else [m.INFO.name for m in REGISTRY]
        return {m.INFO.name: m.plan(ctx) for m in REGISTRY
                if m.INFO.name in chosen and (baseline is not None or not m.INFO.needs_baseline)}

    def _launch_plan(self, plans: dict) -> None:
        for p in plans.values():
            if p.state != RUN:
                continue
            for t in p.toggles:
                source = t.apply(self.sub.source) if t.apply else self.sub.source
                for rep in range(self.opts.repeat if t.apply else 1):
                    key = (t.probe, t.label, hashlib.sha256(source.encode()).hexdigest(), rep)
                    if key in self._launched:      # planned again from the baseline's evidence: once is enough
                        continue
                    self._launched.add(key)
                    self.launch(Role.SINGLE if rep == 0 else Role.REPEAT, t.probe, t.label, source, t.switches, rep)

    def _record_plans(self, plans: dict) -> None:
        self.session.probes = [{"name": n, "state": p.state, "why": p.why, "evidence": p.evidence,
                                "toggles": [t.label for t in p.toggles]}
                               for n, p in sorted(plans.items(), key=lambda kv: [m.INFO.name for m in REGISTRY]
                                                  .index(kv[0]))]
        self.save()

    # -- the diagnosis ---------------------------------------------------------------------------------
    def diagnose(self) -> Session:
        s = self.session
        self._t0 = time.monotonic()
        self.sched = Scheduler(self.opts.jobs, self.stop)
        try:
            if self.opts.preflight and not self._preflight():
                return self._finish()
            base = self.launch(Role.BASELINE, None, None, self.sub.source)
            if self.opts.probes == []:
                self._all_launched.set()
            for rep in range(1, self.opts.repeat):
                self.launch(Role.REPEAT, None, "repeat", self.sub.source, rep=rep)
            early = self.plan(None)
            removers = self._removers(early)
            self._launch_plan(early)
            self._record_plans(early)
            if not self._wait(self._states[base.id].done):
                self._release_held()
                return self._finish()
            if self._moot.is_set():
                # Every variant would stop where the baseline did: running them only costs the user time.
                self._release_held()
                self._wait_for(lambda: all(st.done.is_set() for st in self._states.values()))
                s.complete = not self.stop.is_set()
                return self._finish()
            late = self.plan(base)
            self._record_plans(late)
            early_singles = [r for r in list(s.runs) if r.role == Role.SINGLE]
            self._launch_plan(late)       # identical variants are not run again
            self._release_held()
            removers = self._removers(late)
            singles = [r for r in list(s.runs) if r.role == Role.SINGLE]
            if self.opts.bisect and len(removers) >= 2 and base.failed_stage is not None:
                # Start the combinations the search will most likely ask for as soon as the early
                # toggles have decided, rather than after every toggle: all suspects out, and only the
                # ones that fix it alone kept in. The search reuses them when it asks the same.
                if not self._wait_for(lambda: all(self._decided(r) for r in early_singles)):
                    return self._finish()
                self.fails_with([], removers, wait=False)
                known = bisector.fixing_probes(s, base)
                if len(known) >= 2:
                    self.fails_with(known, removers, wait=False)
            if not self._wait_for(lambda: all(self._decided(r) for r in singles)):
                return self._finish()
            if self.opts.bisect:
                bisector.search(s, list(removers), fails=lambda keep: self.fails_with(keep, removers),
                                prefetch=lambda subsets: [self.fails_with(k, removers, wait=False) for k in subsets])
            self._verdict_known()
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
        except BadInput:
            raise
        except Exception:  # noqa: BLE001 - a bug of ours: keep what finished, say so, conclude on it
            import traceback
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
        finally:
            self.sched.close()
            kept = self.runner.close()
            if kept:
                s.notes.append(f"run directories kept in {kept}")
            self.save()

    def _verdict_known(self) -> None:
        """The baseline and every decisive toggle and combination have ended: the verdict and the top cause
        stand (a solo confirmation may still qualify them). Say it now; the fix costs and confirmations follow."""
        if self.stop.is_set():
            return
        self._conclude()
        self.session.verdict_at_s = round(time.monotonic() - self._t0, 1)
        self.save()
        self.on_verdict(self.session)

    def _finish(self) -> Session:
        self.session.diagnosis_s = round(time.monotonic() - self._t0, 1)
        if self.session.verdict.stage == "reference" and self.session.verdict.status == Status.NEEDS_GPU:
            return self.session      # the machine cannot judge it: nothing else to conclude
        self._conclude()
        return self.session

    def _preflight(self) -> bool:
        """The problem's reference alone, before any stage: does it import, and can it run here? A
        reference that cannot be imported is a bad folder (BadInput); one that cannot run here makes
        the verdict needs_gpu. Returns whether the diagnosis goes on."""
        self._quiet = True
        ref = self.launch(Role.REFERENCE, None, "reference check", self.sub.source, stages=["reference"])
        self._wait(self._states[ref.id].done)
        self._quiet = False
        st = ref.stages[0] if ref.stages else None
        if st is None or st.status == Status.OK or st.status == Status.INTERRUPTED:
            self.save()
            return st is not None and st.status == Status.OK
        werr = next((e for e in st.events if e["k"] == "worker_error"), None)
        missing = _missing_package(werr, self.opts.problem)
        if missing:      # a package of the problem's own that this machine lacks: it cannot judge, the folder is fine
            self.session.verdict = Verdict(
                Status.NEEDS_GPU, stage="reference", phase=st.phase,
                message=f"this machine cannot judge the problem: its reference imports '{missing}', which is not "
                        f"installed here", note=f"install '{missing}' (the problem's own dependency), or run it on "
                                                f"the machine the problem is set for", runs=[ref.id])
            self.session.complete = True
            self.save()
            return False
        if werr and st.status != Status.NEEDS_GPU and any(p.name == "reference_import" and not p.ok for p in st.phases):
            self._quiet = True       # a bad folder leaves no report behind
            raise BadInput(f"{self.opts.problem}/reference.py: fails to import: {werr['type']}: "
                           f"{werr['message'].strip().splitlines()[0][:300] if werr['message'].strip() else ''}")
        env = next((e for e in st.events if e["k"] == "env"), {})
        msg = (st.message or "").replace("the worker failed before the stage: ", "")
        msg = msg if len(msg) <= 300 else msg[:msg.find(". ", 0, 300) + 1 or 300]
        where = f"{env['gpu']} (compute capability {env['capability']})" if env.get("gpu") else "no CUDA GPU"
        target = (f"the problem is set for {', '.join(self.opts.gpus_for)}" if self.opts.gpus_for else
                  "it needs FP4 tensor cores (sm_100, B200 class)" if any(x in msg.lower() for x in
                                                                           ("fp4", "e2m1", "float4", "sm_100"))
                  else "run it on the GPU the problem is set for")
        self.session.verdict = Verdict(Status.NEEDS_GPU, stage="reference", phase=st.phase,
                                       message=f"the problem's own reference cannot run here: {msg}",
                                       note=f"this machine has {where}; {target}", runs=[ref.id])
        self.session.complete = True
        self.save()
        return False

    def _conclude(self) -> None:
        s = self.session
        with self.lock:
            bisector.conclude(s)
            _state_notes(s)
            s.verdict = summary.verdict(s, interrupted=self.stop.is_set())
            if self.stop.is_set() and s.verdict.status != Status.INTERRUPTED:
                s.verdict.note = "the diagnosis was interrupted: conclusions rest only on the runs that finished"
            busy = evidence.host_busy(s)
            # measured again on every conclusion, over every run so far: the latest measure is the one
            s.warnings = [w for w in s.warnings if w["kind"] != Warning_.HOST_BUSY]
            if busy:
                s.warn(Warning_.HOST_BUSY, busy)
            for r in s.runs:
                e = evidence.effective(s, r)
                if e.flaky:
                    s.warn(Warning_.FLAKY, e.note)
        self.save()

    def _confirm(self, runs: list[Run]) -> None:
        """Rerun each doubtful run alone, up to the stage its doubt is about."""
        launched = []
        for r in runs:
            last = next((i for i, st in enumerate(r.stages) if evidence.doubt(st)), len(r.stages) - 1)
            stages = [st.name for st in r.stages[: last + 1] if st.status != Status.SKIPPED]
            if r.stages and r.stages[last].status in ENDS_RUN:
                # A failure in doubt: if it does not come back alone, the stages it cut off must run too,
                # or a pass of the first stages would stand for a pass of the whole run.
                planned = self._states[r.id].stages
                stages += planned[planned.index(stages[-1]) + 1:] if stages[-1] in planned else []
            c = self.launch(Role.CONFIRM, r.probe, r.toggle, self.sources[r.id],
                            tuple(k for k in r.switches if k == WARM), stages=stages, confirms=r.id)
            launched.append(c)
        self._wait_for(lambda: all(self._states[c.id].done.is_set() for c in launched))

    # -- the bisector's test ---------------------------------------------------------------------------
    @staticmethod
    def _removers(plans: dict) -> dict[str, Toggle]:
        return {n: next(t for t in p.toggles if t.removes) for n, p in plans.items()
                if p.state == RUN and BY_NAME[n].INFO.bisect and any(t.removes for t in p.toggles)}

    def fails_with(self, keep: list[str], removers: dict[str, Toggle], wait: bool = True) -> bool | None:
        """With only the suspects in `keep` left in, does the baseline's failure come back? Runs only the
        stages up to the one that failed: they tell. None when the run cannot tell (see comparison.compare)."""
        try:
            source = self._combined(keep, removers)
        except Exception:  # noqa: BLE001 - a toggle that cannot apply to this combination: it tells nothing
            import traceback
            self.errors.append(traceback.format_exc())
            return None
        base = self.session.baseline
        failed = base.failed_stage if base is not None and self._states[base.id].done.is_set() else None
        stages = self.stages[: self.stages.index(failed.name) + 1] if failed else None
        keep = self._kept(keep, removers)
        removed = [n for n in removers if n not in keep]
        label = "keep " + " + ".join(keep) if keep else "all suspects removed"
        if source == self.sub.source:
            run = base
        else:
            run = self.launch(Role.COMBINATION, "+".join(sorted(removed)) or None, label, source, stages=stages,
                              removed=tuple(sorted(removed)), reuse=True)
        if not wait:
            return None
        if not self._wait(self._states[run.id].done):
            return None
        verdict = comparison.compare(self.session, base, run) if run is not base else "same"
        return {"same": True, "fixed": False, "moved": False}.get(verdict)

    @staticmethod
    def _kept(keep: list[str], removers: dict[str, Toggle]) -> list[str]:
        # A kept suspect keeps what it requires when the only way to remove that is blunt (compile off
        # would take the recompiles or the fullgraph failure away with it)
        return list(keep) + [r for k in keep for r in BY_NAME[k].INFO.requires
                             if r in removers and r not in keep and comparison.toggle_rank(removers[r]) == 0]

    def _combined(self, keep: list[str], removers: dict[str, Toggle]) -> str:
        source = self.sub.source
        kept = self._kept(keep, removers)
        for n in removers:
            if n not in kept:
                source = removers[n].apply(source)
        return source


def _missing_package(werr: dict | None, problem: str) -> str | None:
    """The third-party package a reference failed to import, when it is not a file of the problem folder."""
    import re
    from pathlib import Path
    if not werr or werr.get("type") != "ModuleNotFoundError":
        return None
    m = re.search(r"No module named '([^']+)'", werr.get("message", ""))
    if not m:
        return None
    top = m.group(1).split(".")[0]
    d = Path(problem) if problem else None
    if d is not None and ((d / f"{top}.py").exists() or (d / top).is_dir()):
        return None
    return top


def _state_notes(s: Session) -> None:
    """A conclusion whose runs differ in state kept between their processes says so: that state, not the
    toggle, may be what made the difference."""
    base = s.baseline
    if base is None:
        return
    for c in s.causes:
        notes = {carried.difference(base, r) for r in (s.run(i) for i in c.evidence) if r is not None and r is not base}
        c.state = "; ".join(sorted(n for n in notes if n))
    if s.fix and s.run(s.fix.run):
        s.fix.state = carried.difference(base, s.run(s.fix.run))


def probe_table() -> list[dict]:
    return [{"name": m.INFO.name, "suspect": m.INFO.suspect, "finds": m.INFO.finds, "toggles": m.INFO.toggles}
            for m in REGISTRY]


__all__ = ["Engine", "Options", "probe_table", "NO_EVIDENCE"]
