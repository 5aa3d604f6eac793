"""The real runner: one variant of a submission through the harness's stages, each step a fresh isolated child.

The engine hands it Jobs through the Runner interface (runner/__init__.py); a test hands the engine a
scripted runner instead. Every run has a container of its own (runner/container.py), empty when the run
starts and shared by all its steps, as the harness's container is shared by the steps of one submission.
A stage is what the harness's run_pytorch_script does: write the stage's files into the working
directory, run `python3 submission.py` there (the compile step: its own limit, its ending recorded and
ignored), then the stage itself, which alone decides; then remove the stage's files. A run may be
executed in several jobs (the stages that decide the verdict first, the stages that verify a fix later):
its container lives until the diagnosis ends, so later stages see what earlier ones left.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path

from diagnose.runs import harness
from diagnose.runs.protocol import Depth, WorkerSpec
from diagnose.runs.runner import Job, wait_to_start
from diagnose.runs.runner.arbiter import GpuArbiter
from diagnose.runs.runner.child import Limits, describe_process
from diagnose.runs.runner.container import SPAWNED_DIR, Container, child_env, written_groups
from diagnose.runs.runner.deeper import judge, settle
from diagnose.runs.runner.isolate import python_argv, run_child
from diagnose.runs.runner.process_tree import KEPT_PREFIX, TMP_PREFIX
from diagnose.runs.runner.stage_facts import predict_stage
from diagnose.runs.runner.timeline import build_stage
from diagnose.runs.runner.verify import outputs_dir, verify_stage
from diagnose.runs.runner.walls_check import isolation, jail_for
from diagnose.runs.settings import Settings
from diagnose.session import Run, StageResult
from diagnose.status import ENDS_RUN, Status
from diagnose.tasks.loader import spec_line, stage_cases, stage_files

REFERENCE_BUDGET_S = 120.0     # the reference check before any stage: an import and one small case
# Helion's search in a tuning run, unless the user's environment sets them: the quick effort, at most 15 s per
# shape (a full search takes minutes per shape; the tuning run does every shape of the task)
TUNING_ENV = {"HELION_AUTOTUNE_EFFORT": "quick", "HELION_AUTOTUNE_BUDGET_SECONDS": "15"}


def spec_for(s: Settings, what: str, box: Container, job: Job, argv: list[str], gpu_lock: bool,
             tool_paths: list[str], stacks: str, outputs: str = "") -> WorkerSpec:
    """What the worker reads for one step of a job (the stage itself, or `what="compile"`, its compile step):
    the one place the run's settings become the child's."""
    return WorkerSpec(submission=str(box.work / "submission.py"), stage=what, task=s.task_for(what),
                      budget_s=s.deadline(what, REFERENCE_BUDGET_S), root=str(box.root), stacks_prefix=stacks,
                      depth=s.depth, sample_repeats=s.sample_repeats, sample_seconds=s.sample_seconds,
                      gpu_lock=gpu_lock, flush_bytes=s.flush_bytes, watch=list(job.watch), sample=s.sample,
                      private_mounts=s.private_mounts, tool_paths=tool_paths, argv=argv, shared=list(s.shared),
                      hooks=list(s.hooks), hook_args=dict(job.hook_args), outputs=outputs)


def capped(st: StageResult, budget: float) -> None:
    """A stage a CPU check ran up to its cap instead of its budget (Settings.deadline): it keeps its budget, for the
    table's share, and a stage the cap stopped says it was the cap, not the budget."""
    cap = st.budget_s
    if cap == budget:
        return
    st.budget_s = budget
    if st.lost_worker:      # the harness's pool would wait out the budget, not our cap
        st.message = harness.lost_task(st.lost_worker.get("how", "its end"), st.phase, budget)
    elif st.status == Status.TIMEOUT:
        st.message = st.message.replace(f"{cap:g} s budget", f"{cap:g} s cap on this CPU (no GPU: its {budget:g} s "
                                                             f"budget is not applied)")


def _ran_on_gpu(st: StageResult) -> bool:
    return any(e["k"] == "env" and e.get("cuda_available") for e in st.events)


def jail_failed(jail: dict | None) -> str | None:
    """Why the run's jail failed, where its init said so: then everything in the step's namespace was killed
    with it, which a stage must not report as the submission's crash."""
    error = (jail or {}).get("error")
    return f"the run's jail failed ({error}): the step's processes ended with it" if error else None


def walls_here(private_mounts: bool = True, network: str = "own") -> dict:
    """How each run would be walled off on this machine (StageRunner.isolation), for a command that starts no run
    itself: a triage says it once, at the top."""
    from diagnose.tasks.loader import load_task
    runner = StageRunner(Settings(task=load_task(None, "fp8-dual-gemm", small=True), stages=("test",),
                                  private_mounts=private_mounts, network=network))
    try:
        return runner.isolation()
    finally:
        runner.close()


class StageRunner:
    """Runs jobs for real, over the settings' GPUs (none named: whatever is visible); `concurrent` turns on
    GPU arbitration (needed only when runs overlap)."""

    def __init__(self, settings: Settings, concurrent: bool = False, on_event=None):
        self.settings = settings
        self.gpus = list(settings.gpu_ids) or [None]
        # a sampled timing section takes seconds; a full one up to the harness's 120 s per case
        bound = harness.CASE_WALL_CAP_S + 15 if settings.depth == Depth.FULL else 15.0
        self.arbiters = {g: GpuArbiter(f"gpu{g or 0}", bound) for g in self.gpus} if concurrent else {}
        self.on_event = on_event
        self._lock = threading.Lock()
        self._boxes: dict[str, Container] = {}
        self._snaps: dict[str, dict] = {}          # run id -> the container's files after its last step
        self._gpu_of: dict[str, str | None] = {}
        self._active: Counter[str] = Counter()     # run id -> stages executing now
        self._lingering: dict[str, list] = {}       # run id -> the process trees its steps left alive
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))   # the keeper finds it by our pid

    # -- bookkeeping -----------------------------------------------------------------------------
    def container(self, run_id: str, warm_from: str | None = None) -> Container:
        """The run's container, made on first use: empty, or a copy of another run's whole state."""
        with self._lock:
            if run_id in self._boxes:
                return self._boxes[run_id]
            box = self._boxes[run_id] = Container(self._tmp / run_id)
            gpu_load = Counter(self._gpu_of.values())
            self._gpu_of[run_id] = min(self.gpus, key=lambda g: gpu_load[g])
            source = self._boxes.get(warm_from) if warm_from else None
        if source is not None:
            box.fill_from(source)
        self._snaps[run_id] = box.snapshot()
        return box

    def isolation(self) -> dict:
        """How a run's container is walled off on this machine (walls_check.py), asked before any run."""
        return isolation(self.settings, self._tmp, self.jail_for)

    def jail_for(self, box: Container) -> dict | None:
        """The walls a run's steps are asked for (walls_check.py); None: left off, as the user asked."""
        return jail_for(self.settings, box, self._tmp)

    def active_others(self, run_id: str) -> list[str]:
        with self._lock:
            return [r for r, n in self._active.items() if n and r != run_id]

    def same_gpu(self, run_id: str, others: list[str]) -> list[str]:
        """Those of `others` placed on the run's GPU."""
        with self._lock:
            gpu = self._gpu_of.get(run_id)
            return [r for r in others if r in self._gpu_of and self._gpu_of[r] == gpu]

    def close(self) -> str | None:
        """End what any run left alive; remove every run's directory, unless --keep: then say where they are."""
        for run_id in list(self._lingering):
            self._end_lingering(run_id)
        if self.settings.keep:
            # out of the keeper's pattern, or it would remove the directory as soon as we exit
            kept = self._tmp.with_name(KEPT_PREFIX + self._tmp.name[len(TMP_PREFIX):])
            try:
                self._tmp.rename(kept)
            except OSError:
                return str(self._tmp)
            return str(kept)
        shutil.rmtree(self._tmp, ignore_errors=True)
        return None

    # -- the Runner interface ----------------------------------------------------------------------
    def execute(self, job: Job, on_stage, stop: threading.Event) -> None:
        run, s = job.run, self.settings
        if not wait_to_start(job, stop):
            return
        box = self.container(run.id, job.warm_from)
        gpu = self._gpu_of[run.id]
        env = child_env(box, gpu)
        arbiter = self.arbiters.get(gpu)
        if arbiter is not None and job.lead:
            arbiter.prefer(run.id)
        try:
            for stage in job.stages:
                if stop.is_set():
                    break
                st = self._stage(run, job, stage, box, env, arbiter, stop)
                run.stages.append(st)
                run.settle()
                ended = st.status in ENDS_RUN
                if ended:
                    later = s.stages[s.stages.index(stage) + 1:] if stage in s.stages else []
                    run.stages += [StageResult(name=n, status=Status.SKIPPED, budget_s=s.budgets[n]) for n in later]
                if ended or stage == job.stages[-1]:
                    break
                on_stage(run)
        finally:
            # the container ends with the run's last stage here: what its steps started ends with it
            ended = self._end_lingering(run.id)
            last = next((st for st in reversed(run.stages) if st.status != Status.SKIPPED), None)
            if ended and last is not None:
                last.state["outlived"] = ended
            if job.device_up is not None:
                job.device_up.ended()
        if run.stages:
            on_stage(run)

    def _end_lingering(self, run_id: str) -> list[str]:
        """Kill every process the run's steps left alive (as the harness's container ends them), and say which."""
        with self._lock:
            trees = self._lingering.pop(run_id, [])
        seen: list[str] = []
        for tree in trees:
            tree.scan()
            seen += [describe_process(p) for p in tree.alive(work_only=True)]
            tree.kill_all(tree.root.pid)
        return seen

    def _stage(self, run: Run, job: Job, stage: str, box: Container, env: dict, arbiter, stop) -> StageResult:
        """One harness stage: its files placed, the compile step, the stage, its files removed."""
        s = self.settings
        files = stage_files(s.task, job.source)
        box.place(files)
        cases = box.cases_file([spec_line(c) for c in stage_cases(s.task.to_dict(), stage)]) \
            if stage in harness.JUDGED else None
        argv = [s.task.evaluator or "eval.py", stage, str(cases)] if cases else ["submission.py"]
        self._snaps[run.id] = box.snapshot()     # the harness's own files are not state the submission kept
        step = outputs = None
        try:
            if s.compile_step and stage in harness.JUDGED:
                step = self._step(run, job, stage, "compile", box, env, arbiter, stop, ["submission.py"])
                if step.status == Status.INTERRUPTED:
                    return StageResult(name=stage, status=Status.INTERRUPTED, budget_s=s.budgets.get(stage, 0.0),
                                       message="interrupted by the user in the compile step before it",
                                       compile_step=step)
            outputs = outputs_dir(box, stage) if stage in harness.JUDGED else None
            st = self._step(run, job, stage, stage, box, env, arbiter, stop, argv, outputs)
            st.compile_step = step
            if outputs is not None:     # a verdict the submission cannot write, before any timing is judged
                verify_stage(st, s.task, stage, bool(s.task.evaluator), box, env, self.jail_for(box), outputs,
                             arbiter, stop, owner=f"{run.id}/{stage}.verify")
            if s.depth == Depth.FULL:
                st.predicted_s = st.charged_s if st.status == Status.OK else None
            else:
                predict_stage(st)
            if _ran_on_gpu(st):     # a sample that cannot place the stage against its budget: measured further
                st = settle(st, lambda changes: self._step(run, job, stage, stage, box, env, arbiter, stop, argv,
                                                           settings=s.but(**changes)), stop)
                judge(st)
        finally:
            box.unplace(list(files) + ([cases] if cases else []))
        return st

    def _step(self, run: Run, job: Job, stage: str, what: str, box: Container, env: dict, arbiter,
              stop, argv: list[str], outputs: Path | None = None, settings: Settings | None = None) -> StageResult:
        """One child process in the run's container: the stage itself (under `settings`: a further measure), or its
        compile step (what="compile"). What the container gained meanwhile is what this step wrote."""
        s = settings or self.settings
        evaluated = bool(s.task.evaluator) and what in harness.JUDGED
        tag = stage if what == stage else f"{stage}.{what}"
        submission, stacks = str(box.work / "submission.py"), str(box.tool / f"{tag}.stacks.txt")
        spawned = str(box.root / SPAWNED_DIR / f"{tag}.stacks.txt")
        spec = spec_for(s, what, box, job, argv=argv, gpu_lock=arbiter is not None,
                        tool_paths=env["PYTHONPATH"].split(os.pathsep), stacks=spawned,
                        outputs=str(outputs) if outputs else "")
        budget = spec.budget_s      # one figure for both sides: the parent's deadline and the worker's watchdog
        if what == "tune":     # the search runs to its end once, at the effort a user tunes with by hand
            env = {**env, **{k: os.environ.get(k) or v for k, v in TUNING_ENV.items()}}
        spec_path = box.tool / f"{tag}.spec.json"
        spec_path.write_text(spec.to_json())

        def tagged(ev):
            if (job.device_up is not None and ev.get("k") == "end" and ev.get("name") == "device_init"
                    and ev.get("ok") is not False):     # one that failed: the job's end says so
                job.device_up.started()
            if self.on_event:
                self.on_event(run, what, ev)
        with self._lock:
            self._active[run.id] += 1
        try:
            child = run_child(python_argv(str(spec_path)), cwd=str(box.work), env=env, stacks_path=stacks,
                              spawned_stacks=spawned,
                              limits=Limits(budget, s.max_rss_mb), arbiter=arbiter, owner=f"{run.id}/{tag}",
                              stop=stop, on_event=tagged, others=lambda: self.active_others(run.id),
                              report=evaluated, linger=True, nice=job.nice, jail=self.jail_for(box))
            if child.lingering is not None:
                with self._lock:
                    self._lingering.setdefault(run.id, []).append(child.lingering)
        finally:
            with self._lock:
                self._active[run.id] -= 1
        failed = jail_failed(child.jail)
        if failed:      # the tool's own failure: never the submission's outcome (the engine says so on the run)
            raise RuntimeError(failed)
        st = build_stage(what, child, budget, submission, evaluated)
        capped(st, s.budgets.get(what, REFERENCE_BUDGET_S))
        # a timing judgment needs its GPU to itself: a run on another GPU took CPU time (run_delay_s says how
        # much), never the GPU's, so only the runs placed on this one count as sharing it
        st.contention.gpu_shared = self.same_gpu(run.id, st.contention.overlapped)
        signalled = (child.jail or {}).get("signals")
        if signalled:        # the run signalled its parent, as the harness's process: its jail's init took them
            # worded as the worker's audit hook words a Python call (worker/state.py): one line for one attempt
            st.state.setdefault("reached", []).extend(f"{x['signal']} to its parent (the harness)"
                                                      for x in signalled[:20])
        after = box.snapshot()
        st.state["written"] = written_groups(self._snaps.get(run.id, {}), after)
        self._snaps[run.id] = after
        return st
