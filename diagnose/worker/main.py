"""Child entry point: arm the stack dumper, import torch, load the task, run one stage.

Exit codes: 0 the stage finished (ok or wrong: see the stage_done event), 1 the submission raised,
3 the worker itself failed before the stage could start.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback

from diagnose.worker.channel import Channel


def _frames(tb) -> list[dict]:
    return [{"file": f.filename, "line": f.lineno, "func": f.name, "code": (f.line or "")}
            for f in traceback.extract_tb(tb)]


def _environment(torch) -> dict:
    env = {"torch": torch.__version__, "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
           "cuda_available": torch.cuda.is_available(), "cuda": torch.version.cuda}
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001 - triton is optional (CPU builds)
        env["triton"] = None
    if env["cuda_available"]:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, capability=f"{p.major}.{p.minor}", gpu_mem_gb=round(p.total_memory / 2**30, 1),
                   sm_count=p.multi_processor_count, driver=_driver_version())
    return env


def _driver_version() -> str | None:
    import re
    try:
        with open("/proc/driver/nvidia/version") as fh:
            m = re.search(r"\b(\d+\.\d+(?:\.\d+)?)\b", fh.readline())
            return m.group(1) if m else None
    except OSError:
        return None


def main(spec_path: str) -> int:
    with open(spec_path) as fh:
        spec = json.load(fh)
    ch = Channel(spec["events"])
    # SIGUSR1 from the parent dumps every thread's stack into the stacks file; so does a fatal signal.
    # faulthandler writes from its C handler, so this works even while a thread sleeps inside C code.
    stacks = open(spec["stacks"], "w")  # noqa: SIM115 - must stay open for the process's lifetime
    faulthandler.enable(file=stacks, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    # A watchdog thread as well, for a process that never handles the signal: a thread blocked in a CUDA
    # driver wait can leave SIGUSR1 pending forever. It fires just before the parent's deadline.
    if spec.get("budget_s"):
        faulthandler.dump_traceback_later(max(0.5, spec["budget_s"] - 2.0), file=stacks, exit=False)
    ch.emit("worker_start", pid=os.getpid(), stage=spec["stage"])
    sys.path.insert(0, os.getcwd())

    from diagnose.worker.instrument import Instruments  # noqa: E402 - after the dumper is armed
    from diagnose.worker.stages import STAGE_FUNCS, Ctx, import_module_from

    ctx = None
    try:
        ch.begin("torch_import")
        import torch
        ch.end("torch_import")
        ins = Instruments(ch, torch, spec["submission"], spec.get("timing_lock"))
        with ins.phase("device_init"):
            if ins.cuda:
                torch.cuda.init()
                torch.empty(1, device="cuda")
        ch.emit("env", **_environment(torch))
        ins.hook_captures()
        ctx = Ctx(spec=spec, torch=torch, ins=ins)
        if spec["stage"] != "compile":
            with ins.phase("reference_import"):
                ctx.reference = import_module_from(os.path.join(os.getcwd(), "reference.py"), "reference")
    except BaseException as e:  # noqa: BLE001 - report, then exit with the worker's own code
        ch.emit("worker_error", type=type(e).__name__, message=str(e)[:2000], traceback=traceback.format_exc())
        return 3

    try:
        status = STAGE_FUNCS[spec["stage"]](ctx)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a submission too
        open_phase = ch.failed or ch.phase
        ch.emit("exception", phase=open_phase, type=type(e).__name__, message=str(e)[:4000],
                traceback="".join(traceback.format_exception(e))[-20000:], frames=_frames(e.__traceback__))
        return 1
    ch.emit("stage_done", status=status, t=time.time())
    sys.stdout.flush()
    # Leave at once: Inductor's compile-worker pool may wait minutes at interpreter exit (torch #162199).
    os._exit(0)
