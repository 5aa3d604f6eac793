"""What every harness stage in the worker gets: the spec, torch, the instruments, and the reference's and the
evaluator's functions as they are bound. Its own module, so that the stages and the timing loops both read it
and the timing loops import no stage."""
from __future__ import annotations

from dataclasses import dataclass

from diagnose.runs.protocol import WorkerSpec
from diagnose.runs.worker.instrument import Instruments


@dataclass
class Ctx:
    spec: WorkerSpec
    torch: object
    ins: Instruments
    reference: object = None
    kernel: object = None
    generate: object = None     # the reference's functions, bound once before the submission is imported
    check: object = None
    judges: dict | None = None  # evaluator mode: the reference's functions as the evaluator imported them
    guard: object = None        # worker.guard.Guard: what judges the submission, checked for replacement
    report_fd: int | None = None    # evaluator mode: the descriptor the problem's evaluator reports on

    @property
    def ch(self):
        return self.ins.ch
