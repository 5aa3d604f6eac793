"""The preflight, before any run of the submission: can a run start here at all, and can this machine judge the
problem?

A run's worker imports torch, starts the device and loads the reference before the submission's first line. When
that cannot happen here (torch missing from the Python that runs diagnose, the run's container refusing to start),
every run would die the same way before reaching the submission, and a report would blame the submission for it:
so it is checked once, alone, first, and said in one line with no report (errors.CannotStart). For a problem folder
the check is its reference run alone, which also says whether the reference imports (else a bad folder) and can run
here (else the verdict is needs_gpu); for the built-in task, the baseline's own first process (start_checked): nothing
else starts, and nothing is saved or shown, until that process has its device or has ended. A separate process
for the check cost every diagnosis a torch import (and on a GPU a CUDA context) before its baseline could start.
"""
from __future__ import annotations

import re
import sys

from diagnose.analysis.verdict.started import never_reached
from diagnose.engine.conclusions import Conclusions
from diagnose.engine.runs import RunPool
from diagnose.errors import BadInput, CannotStart
from diagnose.findings import CUT, Verdict, clip
from diagnose.runs.runner import wait_set
from diagnose.session import Role, Run, StageResult
from diagnose.status import Status

_PIP = {"yaml": "pyyaml"}      # a module whose package is named otherwise
_CPU_WHEELS = "https://download.pytorch.org/whl/cpu"


def preflight(pool: RunPool, owner: Conclusions) -> bool:
    """Before any run of the submission, for a problem folder: raises CannotStart when no run can start here,
    BadInput for a bad problem folder; a problem this machine cannot judge makes the verdict needs_gpu (settled by
    `owner`). Returns whether the diagnosis goes on. (The built-in task's start is checked by start_checked.)"""
    if not pool.settings.preflight:
        return True
    pool.mute(keep=False)
    ref = pool.launch(Role.REFERENCE, None, "reference check", pool.source, stages=["reference"])
    pool.wait(ref)
    pool.observer.unmute()
    st = ref.stages[0] if ref.stages else None
    if st is None and ref.outcome == Status.INCOMPLETE and not pool.stop.is_set():
        pool.mute(keep=False)   # the runner failed on it (runs/engine: a bug of ours, in its note): no report
        raise _cannot(None, ref.note or "the reference check's run never started")
    if st is None or st.status == Status.OK or st.status == Status.INTERRUPTED:
        pool.save()
        return st is not None and st.status == Status.OK
    if st.status != Status.NEEDS_GPU and never_reached(st) and not any(p.name == "reference_import" for p in st.phases):
        pool.mute(keep=False)
        raise _cannot(st)
    return _reference_failed(pool, owner, ref, st)


def start_checked(pool: RunPool, launch) -> Run:
    """The baseline, `launch()`ed. For the built-in task its first process is the start check: until that process
    has its device (torch imported, the device started: pool.base_device), nothing else is launched and the pool
    is muted. One that ended without it never reached the submission, and every run would end the same way: that
    is this machine's fault or ours, never the submission's (CannotStart, the pool left muted: no report)."""
    if pool.settings.preflight:
        return launch()         # a problem folder's start was its reference run's
    pool.mute()
    base = launch()
    if wait_set(pool.base_device, pool.stop) and not pool.base_device.up:
        pool.wait_for(lambda: bool(base.stages) or pool.done(base))
        st = base.stages[0] if base.stages else None
        if st is None and not pool.stop.is_set():       # the runner failed on it (the run's jail): ours
            raise _cannot(None, base.note or "the baseline's first process never started")
        if st is not None and st.status not in (Status.OK, Status.INTERRUPTED, Status.NEEDS_GPU):
            raise _cannot(st)
    pool.unmute()
    return base


def _missing(text: str) -> str | None:
    m = re.search(r"No module named '([^'.]+)", text)
    return m.group(1) if m else None


def _cannot(st: StageResult | None, why: str = "") -> CannotStart:
    """The one line: what is missing (or what failed), where the worker's Python is, and what to run."""
    werr = next((e for e in st.events if e.get("k") == "worker_error"), None) if st is not None else None
    if st is not None:
        said = f"{werr['type']}: {werr['message']}" if werr else st.message or str(st.status)
        why = f"{st.phase}: {said}" if st.phase and werr else said
        tail = (st.stderr_tail or "").strip().splitlines()
        missing = _missing(said) or (_missing(tail[-1]) if tail and not werr else None)
    else:
        missing = _missing(why)
    why = clip(" ".join(why.split()), 300)
    exe, where = sys.executable, f"{sys.executable} (sys.prefix {sys.prefix})"
    if missing is None:
        return CannotStart(f"a run's worker could not start here, before any line of the submission ran: {why}; "
                           f"the Python that runs it is {where}")
    import importlib.util
    here = importlib.util.find_spec(missing)      # found, never imported: the parent never imports torch
    if here is not None:    # this Python has it, the run's container does not let its worker reach it: ours
        return CannotStart(f"a run's worker cannot import '{missing}', which the Python that runs diagnose has "
                           f"({here.origin}): the run's container hides it from the worker ({why}); the Python is "
                           f"{where}")
    pkg = _PIP.get(missing, missing)
    how = f"{exe} -m pip install {pkg}" + (f" (on a machine without a GPU, the CPU build: --index-url {_CPU_WHEELS})"
                                          if pkg == "torch" else "")
    return CannotStart(f"no run can start here: the Python that runs diagnose has no '{missing}' (in {why}), looked "
                       f"for in {where}; install it into that interpreter: {how}", missing=missing)


def _reference_failed(pool: RunPool, owner: Conclusions, ref: Run, st: StageResult) -> bool:
    """The reference ran and failed: a package of the problem's own that this machine lacks, a reference that does
    not import (a bad folder), or one that cannot run here. Returns False: the diagnosis goes no further."""
    werr = next((e for e in st.events if e["k"] == "worker_error"), None)
    missing = _missing_package(werr, pool.settings.problem)
    if missing:      # a package of the problem's own that this machine lacks: it cannot judge, the folder is fine
        owner.settle(Verdict(
            Status.NEEDS_GPU, stage="reference", phase=st.phase,
            message=f"this machine cannot judge the problem: its reference imports '{missing}', which is not "
                    f"installed here", note=f"install '{missing}' (the problem's own dependency), or run it on "
                                            f"the machine the problem is set for", runs=[ref.id]), complete=True)
        pool.save()
        return False
    if werr and st.status != Status.NEEDS_GPU and any(p.name == "reference_import" and not p.ok for p in st.phases):
        pool.mute(keep=False)   # a bad folder leaves no report behind
        raise BadInput(f"{pool.settings.problem}/reference.py: fails to import: {werr['type']}: "
                       f"{clip(werr['message'].strip().splitlines()[0], 300) if werr['message'].strip() else ''}")
    env = next((e for e in st.events if e["k"] == "env"), {})
    msg = (st.message or "").replace("the worker failed before the stage: ", "")
    end = msg.find(". ", 0, 300)      # a long message: its first sentence, saying the rest was left out
    msg = msg if len(msg) <= 300 else msg[:end + 1] + CUT if end >= 0 else clip(msg, 300)
    where = f"{env['gpu']} (compute capability {env['capability']})" if env.get("gpu") else "no CUDA GPU"
    target = (f"the problem is set for {', '.join(pool.settings.gpus_for)}" if pool.settings.gpus_for else
              "it needs FP4 tensor cores (sm_100, B200 class)" if any(x in msg.lower() for x in
                                                                       ("fp4", "e2m1", "float4", "sm_100"))
              else "run it on the GPU the problem is set for")
    owner.settle(Verdict(Status.NEEDS_GPU, stage="reference", phase=st.phase,
                         message=f"the problem's own reference cannot run here: {msg}",
                         note=f"this machine has {where}; {target}", runs=[ref.id]), complete=True)
    pool.save()
    return False


def _missing_package(werr: dict | None, problem: str) -> str | None:
    """The third-party package a reference failed to import, when it is not a file of the problem folder."""
    from pathlib import Path
    if not werr or werr.get("type") != "ModuleNotFoundError":
        return None
    m = re.search(r"No module named '([^']+)'", werr.get("message", ""))
    if not m:
        return None
    top = m.group(1).split(".")[0]
    d = Path(problem) if problem else None
    if d is not None and ((d / f"{top}.py").exists() or (d / top).is_dir()):
        return None
    return top
