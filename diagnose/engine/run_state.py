"""What the pool keeps per run while it is scheduled (engine/runs.py), and the priorities it schedules by."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from diagnose.runs.runner import DeviceUp, Job
from diagnose.session import Role, Run, Session
from diagnose.status import Status
from probes.door import deciding

# priorities: lower runs first (see core.py). LEAD: the leading fix's stages past the failure, after every deciding
# stage and before the other fix costing; none is kept off the workers held in reserve (from LATER on they are)
BASELINE, SINGLE, COMBINATION, LEAD, LATER = 0, 1, 2, 3, 4
# Toggles and combinations yield the CPU to the baseline, its repeats and the solo confirmations: beside 14 other
# runs on a 16-core H100 host, Round 9's baseline waited 5.1 s for a CPU (its compile step 3.8 s, its stage 1.3 s)
# and ended 5 s later than alone, which is what the verdict lost. A variant's time-based failure that lost CPU
# time this way is doubted and confirmed alone (analysis/verdict/evidence.doubt).
VARIANT_NICE = 5

MOOT = "not run: the baseline showed that this machine cannot judge the submission"


@dataclass
class RunState:
    run: Run
    source: str
    stages: list[str]
    warm_from: str | None = None
    hook_args: dict = field(default_factory=dict)   # probe -> what its worker hook is handed (a tuning run's plans)
    next: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    prior: str | None = None     # an identical variant's run: this one decides when that one does
    full: bool = False           # a combination verified as a fix: every stage, not only those up to the failure


def job_for(st: RunState, stage: str, solo_stages, base_device: DeviceUp | None, gpu: bool) -> Job:
    """The job that runs one stage of a run. On a GPU the variants start once the baseline's first process has its
    CUDA context (`base_device`): 13 contexts made at once slowed Round 9's baseline by 4-5 s on an H100, which the
    verdict waits for. It comes with the baseline's first job, which sets it whatever happens, so that no variant
    waits on a baseline that never runs; on any machine it is also the engine's start check (engine/preflight.py)."""
    run = st.run
    variant = run.role in (Role.SINGLE, Role.COMBINATION)
    return Job(run=run, source=st.source, stages=[stage], watch=run.watched, warm_from=st.warm_from,
               solo=run.role == Role.CONFIRM or stage in solo_stages, hook_args=st.hook_args,
               nice=VARIANT_NICE if variant else 0, start_after=base_device if variant and gpu else None,
               device_up=base_device if run.role == Role.BASELINE else None)


def priority(st: RunState, stage: str, session: Session, settings, all_launched: bool, leads) -> int:
    """The priority of a run's next stage (core.py lists them). `leads(run)`: is it the leading fix
    (engine/fix_order.py), whose stages past the failure go at the priority of deciding work?"""
    role = st.run.role
    if role in (Role.BASELINE, Role.CONFIRM, Role.REFERENCE, Role.TUNING):
        return BASELINE
    if role == Role.COMBINATION:
        return COMBINATION
    if role == Role.SINGLE and not deciding(st.run.probe):
        return LATER       # it informs the report, never the causes: the deciding runs go first
    base = session.baseline
    failed = base.failed_stage if base is not None else None
    if failed is not None:     # past the baseline's failure a stage only verifies and costs a fix
        if settings.index(stage) <= settings.index(failed.name):
            return SINGLE
        return LEAD if leads(st.run) else LATER
    if base is not None and not all_launched:
        # Before every toggle is launched (until just after the baseline ends): a stage the baseline has not
        # reached would only cost a fix if the baseline fails before it, and taking a worker then delays
        # the verdict and the causes (on Round 9 five fix-costing benchmark stages held workers the late
        # toggles needed). Held, it is promoted as the baseline reaches that stage.
        reached = sum(1 for x in base.stages if x.status != Status.SKIPPED)
        return SINGLE if settings.index(stage) <= reached else LATER
    return SINGLE
