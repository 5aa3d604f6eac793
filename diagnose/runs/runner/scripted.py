"""A scripted runner: replays stage results instead of starting processes, as hyperfine's debug mode does.

Takes a script: `script(run) -> list[StageResult]`, the full list of stages that run would produce (the
runner hands out the ones each job asks for, in order). Gives exact, fast runs of the engine, its
scheduling and its evidence rules: the engine's tests use it, and so does the hidden CLI option
`--runner scripted:FILE` (FILE: JSON, see `from_file`), for end-to-end CLI tests with no process.
Jobs are recorded, with whether each ran solo and which other runs were executing at the same time.
"""
from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path

from diagnose.runs.runner import wait_to_start
from diagnose.session import StageResult
from diagnose.status import ENDS_RUN, Status


class ScriptedRunner:
    # nothing to start: a baseline's process has its device at once. True (the script's start_check): as a real
    # one, its job says so only as it ends, so the engine's start check reads the baseline's first stage
    starts_processes = False

    def __init__(self, script, delay_s: float = 0.0, with_source: bool = False):
        self.script, self.delay_s, self.with_source = script, delay_s, with_source   # script(run[, source])
        self.jobs: list[dict] = []
        self._lock = threading.Lock()
        self._active: set[str] = set()
        self.closed = False

    def execute(self, job, on_stage, stop: threading.Event) -> None:
        run = job.run
        if job.device_up is not None and not self.starts_processes:
            job.device_up.started()
        if not wait_to_start(job, stop):
            return
        with self._lock:
            beside = sorted(self._active)
            self._active.add(run.id)
            self.jobs.append({"run": run.id, "role": str(run.role), "toggle": run.toggle, "stages": list(job.stages),
                              "solo": job.solo, "beside": beside, "watch": list(job.watch),
                              "warm_from": job.warm_from, "nice": job.nice,
                              "held_for_device": job.start_after is not None, "sets_device": job.device_up is not None,
                              "lead": job.lead})
        try:
            planned = {s.name: s for s in (self.script(run, job.source) if self.with_source else self.script(run))}
            for name in job.stages:
                if stop.is_set():
                    break
                time.sleep(self.delay_s)
                st = copy.deepcopy(planned[name]) if name in planned else StageResult(name=name, status=Status.OK)
                if not st.reached and not getattr(st, "scripted_unreached", False):
                    st.reached = list(job.watch)
                run.stages.append(st)
                run.settle()
                if st.status in ENDS_RUN:
                    order = list(planned)
                    run.stages += [StageResult(name=n, status=Status.SKIPPED) for n in order[order.index(name) + 1:]]
                on_stage(run)
                if st.status in ENDS_RUN:
                    break
        finally:
            with self._lock:
                self._active.discard(run.id)
            if job.device_up is not None:
                job.device_up.ended()

    def close(self):
        self.closed = True
        return None


def _matches(rule: dict, run, source: str) -> bool:
    """A rule's `match` names what a run must have: probe (null: the submission as it is), toggle, role,
    removed (the suspects a combination takes out, in any order), source_has and source_lacks (texts its
    source must hold, or must not: what `bisect` tests are scripted by)."""
    m = rule.get("match", {})
    return (("probe" not in m or m["probe"] == run.probe) and ("toggle" not in m or m["toggle"] == run.toggle)
            and ("role" not in m or m["role"] == str(run.role))
            and ("removed" not in m or sorted(m["removed"]) == sorted(run.removed))
            and all(t in source for t in m.get("source_has", []))
            and not any(t in source for t in m.get("source_lacks", [])))


def _stage(d: dict) -> StageResult:
    """A stage as a session holds it, plus `"unreached": true` where no watched line ran (without it an empty
    `reached` is filled with every watched line, as a run that got past them would report)."""
    st = StageResult.from_dict(d)
    st.scripted_unreached = bool(d.get("unreached"))
    return st


def from_file(path: Path) -> ScriptedRunner:
    """{"delay_s": 0.1, "runs": [{"match": {...}, "stages": [StageResult as in a session, ...]}, ...],
    "default": [stages for every run no rule matches], "start_check": true}. The first matching rule wins.
    start_check: the engine's check that a run can start reads the baseline's first stage, as for a runner that
    starts processes (whose baseline's job says it has its device only as the process ends)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    rules = data.get("runs", [])
    default = [_stage(s) for s in data.get("default", [])]

    def script(run, source=""):
        rule = next((r for r in rules if _matches(r, run, source)), None)
        return [_stage(s) for s in rule["stages"]] if rule else copy.deepcopy(default)
    runner = ScriptedRunner(script, delay_s=float(data.get("delay_s", 0.0)), with_source=True)
    runner.starts_processes = bool(data.get("start_check"))
    return runner
