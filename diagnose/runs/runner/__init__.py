"""Isolated runs: the only package that spawns processes. Parent side; never imports torch.

The engine talks to a runner through one small interface, so that a scripted runner can stand in for
the real one (runner/stages.py) in tests, the way hyperfine's mock executor does.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from diagnose.session import Run

# The directory that holds the diagnose package: on the child's PYTHONPATH, and shortened in its stacks.
TOOL_ROOT = str(Path(__file__).resolve().parents[3])   # the folder that holds diagnose/


class DeviceUp(threading.Event):
    """The baseline's first process, as far as its start: set once it has its device (`up`: torch imported, the
    device started) or once its job ended without it. A variant held by it (`Job.start_after`) waits on it; the
    engine's start check (engine/preflight.py) reads `up`."""
    up = False

    def started(self) -> None:
        self.up = True
        self.set()

    def ended(self) -> None:
        self.set()


@dataclass
class Job:
    """Some stages of one run: `run` is filled in place, a stage at a time."""
    run: Run
    source: str
    stages: list[str]
    watch: list[int] = field(default_factory=list)   # edited lines whose execution to record
    warm_from: str | None = None                      # start from this run's whole container (the cache probe)
    solo: bool = False                                # no other run may be alive meanwhile
    hook_args: dict = field(default_factory=dict)     # probe -> what its worker hook is handed (WorkerSpec)
    nice: int = 0                                     # CPU niceness for its processes (a variant beside the baseline)
    # The baseline's head start on a GPU: a variant's first process starts once `start_after` is set, which the
    # baseline's job (`device_up`) sets as its first process has its CUDA context, or has ended.
    start_after: threading.Event | None = None
    device_up: DeviceUp | None = None
    lead: bool = False     # the leading fix's stage: its timing sections are granted first (runner/arbiter.py)


def wait_set(event: threading.Event, stop: threading.Event) -> bool:
    """Until `event` is set; False when the diagnosis was stopped first."""
    while not event.wait(0.1):
        if stop.is_set():
            return False
    return True


def wait_to_start(job: Job, stop: threading.Event) -> bool:
    """Hold the job until its start_after is set; False when the diagnosis was stopped first."""
    return job.start_after is None or wait_set(job.start_after, stop)


class Runner(Protocol):
    def execute(self, job: Job, on_stage: Callable[[Run], None], stop: threading.Event) -> None:
        """Run job.stages in order, appending each StageResult to job.run.stages and calling on_stage;
        stop after a stage that ends the run (and append the rest as skipped), or when `stop` is set."""

    def close(self) -> str | None:
        """Release every resource; return where kept files are, if any."""
