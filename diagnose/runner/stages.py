"""The real runner: one variant of a submission through the harness's stages, each a fresh isolated child.

The engine hands it Jobs through the Runner interface (runner/__init__.py); a test hands the engine a
scripted runner instead. A run may be executed in several jobs (the stages that decide the verdict
first, the stages that verify a fix later): its temporary directory and its compile cache live until
the diagnosis ends, so the later stages see what the earlier ones wrote, as in the harness's container.
The cache is empty when the run starts: the first process of a submission compiles cold.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from diagnose import harness
from diagnose.runner import TOOL_ROOT, Job
from diagnose.runner.arbiter import GpuArbiter
from diagnose.runner.isolate import TMP_PREFIX, Limits, python_argv, run_child
from diagnose.runner.timeline import build_stage, predict_stage
from diagnose.session import ENDS_RUN, Run, StageResult, Status
from diagnose.tasks.loader import Task, assemble

REFERENCE_BUDGET_S = 120.0     # the reference check before any stage: an import and one small case

# Every place torch, Inductor, Triton and CUDA keep compiled artefacts between processes.
CACHE_ENV = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "TRITON_HOME": "triton_home",
             "PYTORCH_KERNEL_CACHE_PATH": "kernels", "CUDA_CACHE_PATH": "cuda"}


@dataclass
class RunSettings:
    task: Task
    stages: list[str]
    budgets: dict[str, float]
    depth: str = "predict"                 # predict | full
    sample_repeats: int = 10
    sample_seconds: float = 3.0
    max_rss_mb: float | None = None
    keep: bool = False
    flush_bytes: int | None = None
    sample: bool = True                    # the line sampler (off only to measure its own overhead)
    extra_env: dict = field(default_factory=dict)


def child_env(cache_dir: Path, settings: RunSettings, gpu: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_COMPILE_JOB_ID", "PYTHONSTARTUP")}
    for var, sub in CACHE_ENV.items():
        (cache_dir / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(cache_dir / sub)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TOOL_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.update(settings.extra_env)
    return env


def outcome_of(stages: list[StageResult]) -> Status:
    ended = next((s for s in stages if s.status in ENDS_RUN), None)
    if ended:
        return ended.status
    return Status.AT_RISK if any(s.status == Status.AT_RISK for s in stages) else Status.OK


def _ran_on_gpu(st: StageResult) -> bool:
    return any(e["k"] == "env" and e.get("cuda_available") for e in st.events)


class StageRunner:
    """Runs jobs for real. `gpus` are the device ids to spread runs over ([None]: whatever is visible);
    `concurrent` turns on GPU arbitration (needed only when runs overlap)."""

    def __init__(self, settings: RunSettings, gpus: list[str | None] | None = None, concurrent: bool = False,
                 on_event=None):
        self.settings = settings
        self.gpus = gpus or [None]
        # a sampled timing section takes seconds; a full one up to the harness's 120 s per case
        bound = harness.CASE_WALL_CAP_S + 15 if settings.depth == "full" else 15.0
        self.arbiters = {g: GpuArbiter(f"gpu{g or 0}", bound) for g in self.gpus} if concurrent else {}
        self.on_event = on_event
        self._lock = threading.Lock()
        self._roots: dict[str, Path] = {}
        self._gpu_of: dict[str, str | None] = {}
        self._active: Counter[str] = Counter()     # run id -> stages executing now
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))   # the keeper finds it by our pid

    # -- bookkeeping -----------------------------------------------------------------------------
    def root(self, run_id: str) -> Path:
        with self._lock:
            if run_id not in self._roots:
                self._roots[run_id] = self._tmp / run_id
                self._roots[run_id].mkdir()
                gpu_load = Counter(self._gpu_of.values())
                self._gpu_of[run_id] = min(self.gpus, key=lambda g: gpu_load[g])
            return self._roots[run_id]

    def cache_dir(self, run_id: str) -> Path:
        return self.root(run_id) / "cache"

    def active_others(self, run_id: str) -> list[str]:
        with self._lock:
            return [r for r, n in self._active.items() if n and r != run_id]

    def close(self) -> str | None:
        """Remove every run's directory, unless --keep: then say where they are."""
        if self.settings.keep:
            return str(self._tmp)
        shutil.rmtree(self._tmp, ignore_errors=True)
        return None

    # -- the Runner interface ----------------------------------------------------------------------
    def execute(self, job: Job, on_stage, stop: threading.Event) -> None:
        run, s = job.run, self.settings
        root = self.root(run.id)
        gpu = self._gpu_of[run.id]
        cache = self.cache_dir(job.cache_from) if job.cache_from else self.cache_dir(run.id)
        env = child_env(cache, s, gpu)
        arbiter = self.arbiters.get(gpu)
        for stage in job.stages:
            if stop.is_set():
                break
            st = self._stage(run, job, stage, root, env, arbiter, stop)
            run.stages.append(st)
            run.outcome = outcome_of(run.stages)
            ended = st.status in ENDS_RUN
            if ended:
                later = s.stages[s.stages.index(stage) + 1:] if stage in s.stages else []
                run.stages += [StageResult(name=n, status=Status.SKIPPED, budget_s=s.budgets[n]) for n in later]
            on_stage(run)
            if ended:
                break

    def _stage(self, run: Run, job: Job, stage: str, root: Path, env: dict, arbiter, stop) -> StageResult:
        s = self.settings
        wd = root / stage
        if wd.exists():
            shutil.rmtree(wd)
        assemble(s.task, wd, job.source)
        budget = s.budgets.get(stage, REFERENCE_BUDGET_S)
        evaluated = bool(s.task.evaluator) and stage in ("test", "benchmark", "leaderboard")
        spec = {"submission": str(wd / "submission.py"), "stage": stage, "task": s.task.to_dict(),
                "depth": s.depth, "sample_repeats": s.sample_repeats, "sample_seconds": s.sample_seconds,
                "gpu_lock": arbiter is not None, "flush_bytes": s.flush_bytes, "budget_s": budget,
                "root": str(root), "watch": job.watch, "sample": s.sample,
                "stacks_prefix": str(root / f"{stage}.stacks.txt")}
        spec_path = root / f"{stage}.spec.json"
        spec_path.write_text(json.dumps(spec))

        def tagged(ev):
            if self.on_event:
                self.on_event(run, stage, ev)
        with self._lock:
            self._active[run.id] += 1
        try:
            child = run_child(python_argv(str(spec_path)), cwd=str(wd), env=env,
                              stacks_path=str(root / f"{stage}.stacks.txt"),
                              limits=Limits(budget, s.max_rss_mb), arbiter=arbiter, owner=f"{run.id}/{stage}",
                              stop=stop, on_event=tagged, others=lambda: self.active_others(run.id),
                              report=evaluated)
        finally:
            with self._lock:
                self._active[run.id] -= 1
        st = build_stage(stage, child, budget, spec["submission"], evaluated)
        if s.depth == "full":
            st.predicted_s = st.charged_s if st.status == Status.OK else None
        else:
            predict_stage(st)
        if st.status == Status.OK and st.predicted_s and st.predicted_s > budget and _ran_on_gpu(st):
            st.status, st.message = Status.AT_RISK, (f"predicted {st.predicted_s:.0f} s against the {budget:g} s "
                                                     f"budget (from a {s.sample_repeats}-repeat sample)")
        return st
