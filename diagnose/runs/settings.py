"""One diagnosis's settings, built once from the command line (cli/prepare.py) and frozen.

The engine reads what to run (the stages, the probes, how many runs at once); the runner reads how to run it
(budgets, depth, the sampler, the container's walls), and `runner/stages.spec_for` turns it into the worker's
spec. `run`, `check` and `bisect` share one builder; check and bisect derive theirs with `but(...)` (no probes,
no confirmation) instead of a second record. The stage list lives here and nowhere else.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from diagnose.runs.harness import JUDGED
from diagnose.runs.protocol import Depth
from diagnose.tasks.loader import Task


@dataclass(frozen=True)
class Settings:
    task: Task
    stages: tuple[str, ...]                # the judged stages, in the harness's order
    budgets: dict = field(default_factory=dict)   # step ("compile", a stage) -> seconds
    # check without a GPU: a judged stage runs up to this (or its budget, if longer), never stopped at the budget
    cpu_cap_s: float | None = None
    # -- how a stage runs (the runner, and the worker through spec_for) --
    depth: Depth = Depth.PREDICT           # predict the timing loops from a sample, or run every repeat
    sample_repeats: int = 10
    sample_seconds: float = 3.0
    max_rss_mb: float | None = None
    keep: bool = False                     # keep the runs' directories
    flush_bytes: int | None = None
    sample: bool = True                    # the line sampler (off only to measure its own overhead)
    compile_step: bool = True              # run the harness's compile step before each stage
    private_mounts: bool = True            # a private /tmp and /dev/shm for each run, where the kernel allows
    shared: tuple[str, ...] = ()           # directories of this machine's that runs may use, in place
    hidden: tuple[str, ...] = ()           # directories no run may see (the out folders): empty inside its jail
    network: str = "own"                   # "own": a loopback of the run's own; "host": this machine's (on request)
    gpu_ids: tuple[str, ...] = ()          # --gpus: the devices to spread runs over (empty: whatever is visible)
    # -- what the diagnosis runs (the engine) --
    probes: tuple[str, ...] | None = None  # None: every probe whose suspect is present; (): none
    jobs: int = 1
    repeat: int = 1
    gpu: bool = False                      # this machine has a CUDA GPU
    bisect: bool = True
    confirm: bool = True                   # rerun alone what a time-based conclusion rests on
    rules: tuple = ()                      # what the problem's evaluator sets ({name, value, file, line})
    hooks: tuple[str, ...] = ()            # the probes' worker hooks, by module (the CLI names them from the registry)

    def but(self, **changes) -> "Settings":
        """The same settings with a command's own choices (check: no probes, one run at a time)."""
        return dataclasses.replace(self, **changes)

    # -- what the task decides --
    @property
    def preflight(self) -> bool:
        """A problem folder's reference is checked alone before any stage."""
        return not self.task.builtin

    @property
    def solo_stages(self) -> tuple[str, ...]:
        """A folder's own evaluator decides the timing: those stages run with nothing beside them."""
        return ("benchmark", "leaderboard") if self.task.evaluator else ()

    @property
    def problem(self) -> str:
        return self.task.directory

    @property
    def gpus_for(self) -> list[str]:
        return list(self.task.gpus)

    def task_for(self, step: str) -> dict:
        """The task as a step reads it. A tuning run searches only the shapes of the stages this diagnosis runs: a
        benchmark shape no stage reaches needs no pin, and its search cost the tuning run as long as a test's."""
        task = self.task.to_dict()
        if step == "tune":
            task = {**task, "tests": task["tests"] if "test" in self.stages else [],
                    "benchmarks": task.get("benchmarks", []) if {"benchmark", "leaderboard"} & set(self.stages) else []}
        return task

    @property
    def cases(self) -> list[dict]:
        """The task's test then benchmark cases (a warm-up's shapes)."""
        return list(self.task.tests) + list(self.task.benchmarks)

    def deadline(self, step: str, default: float) -> float:
        """When a step is stopped: its budget, or on a CPU check a judged stage's cap (time decides nothing there)."""
        budget = self.budgets.get(step, default)
        return max(budget, self.cpu_cap_s) if self.cpu_cap_s and step in JUDGED else budget

    def index(self, stage: str) -> int:
        return self.stages.index(stage)

    def through(self, stage: str) -> list[str]:
        """The stages up to and including `stage`."""
        return list(self.stages[: self.index(stage) + 1])
