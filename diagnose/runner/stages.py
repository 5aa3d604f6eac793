"""Run one variant of a submission through the harness's stages, each a fresh isolated child.

The stages of one run share one compile cache, empty when the run starts: the first process of a
submission compiles cold, and later stages see what earlier ones wrote, as in the real harness's
container. A failed stage skips the rest, as the harness does.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from diagnose.runner import TOOL_ROOT
from diagnose.runner.isolate import python_argv, run_child
from diagnose.runner.timeline import build_stage, predict_stage
from diagnose.session import FAILURES, Run, StageResult
from diagnose.tasks.loader import Task

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
    cuda_visible: str | None = None        # pin the child to one GPU
    timing_lock: str | None = None
    flush_bytes: int | None = None
    extra_env: dict = field(default_factory=dict)


def child_env(cache_dir: Path, settings: RunSettings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_COMPILE_JOB_ID", "PYTHONSTARTUP")}
    for var, sub in CACHE_ENV.items():
        (cache_dir / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(cache_dir / sub)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TOOL_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if settings.cuda_visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = settings.cuda_visible
    env.update(settings.extra_env)
    return env


def _workdir(root: Path, stage: str, task: Task, source: str) -> Path:
    wd = root / stage
    shutil.copytree(task.directory, wd, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (wd / "submission.py").write_text(source, encoding="utf-8")
    return wd


def outcome_of(stages: list[StageResult]) -> str:
    failed = next((s for s in stages if s.status in FAILURES), None)
    if failed:
        return failed.status
    return "at_risk" if any(s.status == "at_risk" for s in stages) else "ok"


def _ran_on_gpu(st: StageResult) -> bool:
    return any(e["k"] == "env" and e.get("cuda_available") for e in st.events)


def execute(run: Run, source: str, settings: RunSettings, cache_dir: Path | None = None,
            on_event=None, on_stage=None, stop: threading.Event | None = None, cutoff=None) -> Run:
    """Fill `run.stages` stage by stage; `on_stage(run)` is called after each, so results are saved as
    they arrive. `cache_dir` shares a compile cache across runs (the cache probe); None is cold."""
    root = Path(tempfile.mkdtemp(prefix="diagnose-"))
    cache = cache_dir or root / "cache"
    try:
        env = child_env(cache, settings)
        for i, stage in enumerate(settings.stages):
            wd = _workdir(root, stage, settings.task, source)
            spec = {"submission": str(wd / "submission.py"), "stage": stage, "task": settings.task.to_dict(),
                    "depth": settings.depth, "sample_repeats": settings.sample_repeats,
                    "sample_seconds": settings.sample_seconds, "timing_lock": settings.timing_lock,
                    "flush_bytes": settings.flush_bytes,
                    "events": str(root / f"{stage}.events.jsonl"), "stacks": str(root / f"{stage}.stacks.txt")}
            budget = settings.budgets[stage]
            spec["budget_s"] = budget
            spec_path = root / f"{stage}.spec.json"
            spec_path.write_text(json.dumps(spec))

            def tagged(ev, stage=stage):
                if on_event:
                    on_event(run, stage, ev)
            child = run_child(python_argv(str(spec_path)), cwd=str(wd), env=env, events_path=spec["events"],
                              stacks_path=spec["stacks"], budget_s=budget, max_rss_mb=settings.max_rss_mb,
                              stop=stop, on_event=tagged, cutoff=cutoff)
            st = build_stage(stage, child, budget, spec["submission"])
            if settings.depth == "full":
                st.predicted_s = st.wall_s if st.status == "ok" else None
            else:
                predict_stage(st)
            if st.status == "ok" and st.predicted_s and st.predicted_s > budget and _ran_on_gpu(st):
                st.status, st.message = "at_risk", (f"predicted {st.predicted_s:.0f} s against the {budget:g} s "
                                                    f"budget (from a {settings.sample_repeats}-repeat sample)")
            run.stages.append(st)
            run.outcome = outcome_of(run.stages)
            if st.status in FAILURES or child.killed:
                run.stages += [StageResult(name=s, status="skipped", budget_s=settings.budgets[s])
                               for s in settings.stages[i + 1:]]
                if child.killed in ("interrupted", "cutoff"):
                    run.note = run.note or f"stopped early in {stage}: {child.killed}"
            if on_stage:
                on_stage(run)
            if st.status in FAILURES or child.killed:
                break
    finally:
        if not settings.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            run.note = (run.note + f" kept: {root}").strip()
    return run
