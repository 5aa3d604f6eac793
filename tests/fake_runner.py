"""A scripted runner for exact engine tests, as hyperfine's mock executor is: no process starts.

`script(run) -> list[StageResult]` returns the stages a run would produce (the full list; the runner
hands out the ones each job asks for, in order). Jobs are recorded, with whether each ran solo and which
other runs were executing at the same time, so tests can assert the scheduling itself.
"""
from __future__ import annotations

import copy
import threading
import time

from diagnose.runner.stages import outcome_of
from diagnose.session import ENDS_RUN, StageResult, Status


class ScriptedRunner:
    def __init__(self, script, delay_s: float = 0.0):
        self.script, self.delay_s = script, delay_s
        self.jobs: list[dict] = []
        self._lock = threading.Lock()
        self._active: set[str] = set()
        self.closed = False

    def execute(self, job, on_stage, stop: threading.Event) -> None:
        run = job.run
        with self._lock:
            beside = sorted(self._active)
            self._active.add(run.id)
            self.jobs.append({"run": run.id, "role": str(run.role), "toggle": run.toggle, "stages": list(job.stages),
                              "solo": job.solo, "beside": beside, "watch": list(job.watch),
                              "warm_from": job.warm_from})
        try:
            planned = {s.name: s for s in self.script(run)}
            for name in job.stages:
                if stop.is_set():
                    break
                time.sleep(self.delay_s)
                st = copy.deepcopy(planned[name]) if name in planned else StageResult(name=name, status=Status.OK)
                if not st.reached and not getattr(st, "scripted_unreached", False):
                    st.reached = list(job.watch)
                run.stages.append(st)
                run.outcome = outcome_of(run.stages)
                if st.status in ENDS_RUN:
                    order = list(planned)
                    run.stages += [StageResult(name=n, status=Status.SKIPPED) for n in order[order.index(name) + 1:]]
                on_stage(run)
                if st.status in ENDS_RUN:
                    break
        finally:
            with self._lock:
                self._active.discard(run.id)

    def close(self):
        self.closed = True
        return None
