"""What the pool keeps per run while it is scheduled (engine/runs.py), and the priorities it schedules by."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from diagnose.session import Run

BASELINE, SINGLE, COMBINATION, LATER = 0, 1, 2, 3     # priorities: lower runs first (see core.py)
# Toggles and combinations yield the CPU to the baseline, its repeats and the solo confirmations: beside 14 other
# runs on a 16-core H100 host, Round 9's baseline waited 5.1 s for a CPU (its compile step 3.8 s, its stage 1.3 s)
# and ended 5 s later than alone, which is what the verdict lost. A variant's time-based failure that lost CPU
# time this way is doubted and confirmed alone (analysis/evidence.doubt).
VARIANT_NICE = 5

MOOT = "not run: the baseline showed that this machine cannot judge the submission"


@dataclass
class RunState:
    run: Run
    source: str
    stages: list[str]
    warm_from: str | None = None
    memo: list = field(default_factory=list)   # a tuning run: the dicts whose contents it reports
    next: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    prior: str | None = None     # an identical variant's run: this one decides when that one does
