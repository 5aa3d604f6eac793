"""Child entry point: arm the guards, import torch, load the task, run one stage, then end the way the
harness's process for that stage ends.

- The compile step is `python3 submission.py`: the process exits through the interpreter's normal
  shutdown, non-daemon threads are joined and atexit handlers run. The tool's atexit handler is
  registered first, so it runs last and marks a clean exit; a step whose work finished but whose
  process never got there is a timeout in the phase `interpreter_exit`.
- The other stages of the built-in model follow the evaluator it models (GPU MODE's
  eval_better_bench.py): the submission runs in a spawned pool worker, which the pool terminates when
  the stage is done, or when the worker sent back an exception, so the submission's threads and atexit
  handlers never hold that stage up. The worker ends the same way, at once, after saying so. A problem's
  own eval.py exits as the compile step does: through the interpreter.
- Nothing the submission started is killed here: in the harness it lives on in the container (and holds
  the step open if it inherited stdout or stderr). The runner ends it when the run's container ends.

Exit codes: 0 the stage finished (ok or wrong: see the stage_done event), 1 the submission raised,
3 the worker itself failed before the stage could start.
"""
from __future__ import annotations

import atexit
import faulthandler
import os
import signal
import sys
import time
import traceback

from diagnose.runs.jail_names import unpack
from diagnose.runs.protocol import DUMP_FD_ENV, FDS_ENV, WALLS_ENV, WorkerSpec
from diagnose.runs.subreaper import become_subreaper
from diagnose.runs.worker import container
from diagnose.runs.worker.channel import Channel
from diagnose.runs.worker.gpu_lock import GpuLock
from diagnose.runs.worker.guard import Guard
from diagnose.runs.worker.watchdog import Watchdog

# What torch says when a CUDA call meets a machine without CUDA.
_NO_CUDA = ("not compiled with cuda", "no nvidia driver", "no cuda gpus", "cuda driver initialization failed",
            "cannot get cuda generator", "cuda is not available", "no cuda-capable device",
            "found no nvidia driver", "cuda error: no cuda", "nvml", "cudagraph")


def _frames(tb) -> list[dict]:
    frames = [{"file": f.filename, "line": f.lineno, "func": f.name, "code": (f.line or "")[:300]}
              for f in traceback.extract_tb(tb)]
    if len(frames) > 60:   # a deep recursion: keep both ends, say what was cut
        frames = frames[:30] + [{"file": "…", "line": 0, "func": f"({len(frames) - 60} frames cut)", "code": ""}] \
            + frames[-30:]
    return frames


def _environment(torch) -> dict:
    env = {"torch": torch.__version__, "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
           "cuda_available": torch.cuda.is_available(), "cuda": torch.version.cuda}
    try:
        import triton
        env["triton"] = triton.__version__
    except (ImportError, OSError, RuntimeError):    # triton is optional (CPU builds), or its libraries are
        env["triton"] = None
    if env["cuda_available"]:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, capability=f"{p.major}.{p.minor}", gpu_mem_gb=round(p.total_memory / 2**30, 1),
                   sm_count=p.multi_processor_count, driver=_driver_version(), gpu_count=torch.cuda.device_count())
    return env


def _driver_version() -> str | None:
    import re
    try:
        with open("/proc/driver/nvidia/version") as fh:
            m = re.search(r"\b(\d+\.\d+(?:\.\d+)?)\b", fh.readline())
            return m.group(1) if m else None
    except OSError:
        return None


def needs_cuda(exc: BaseException, frames: list[dict], torch) -> str | None:
    """Why this failure only says that this machine has no CUDA, or None if it says more than that."""
    if torch is None or torch.cuda.is_available():
        return None
    text = f"{type(exc).__name__}: {exc}".lower()
    through_cuda = any(f"{os.sep}torch{os.sep}cuda{os.sep}" in f["file"] for f in frames)
    if through_cuda or any(s in text for s in _NO_CUDA) or "'cuda'" in text or "device='cuda" in text:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
    return None


def _outliving(ch) -> None:
    """Before this process leaves: every process the submission started that is still alive. This process is
    a subreaper, so the orphans of its tree are its children now; once it is gone they re-parent to the runner,
    which could not tell them apart from another run's (a new session and an emptied environment hide them).
    The runner ends them when the run's container ends."""
    import psutil
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    procs = []
    for k in kids:
        try:
            procs.append([k.pid, k.create_time()])
        except psutil.Error:
            continue
    if procs:
        ch.emit("outlive", procs=procs[:200])


def _terminated(ch, dog, code: int) -> None:
    """The built-in model's end of a stage, passed or raised: the submission runs in the evaluator's pool worker,
    which the pool terminates (eval.py's `with Pool(...)` exits, normally or with the exception the worker sent
    back), so the submission's threads and atexit handlers, and torch's own at exit, never hold the stage up. What
    it started lives on (the runner ends it with the run's container), and keeps the stage open if it holds
    stdout or stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    _outliving(ch)
    ch.emit("exit_clean", how="terminated, as the harness's pool terminates its worker")
    dog.resume_parent()
    os._exit(code)


def _lent(spec: WorkerSpec) -> list[str]:
    """What this machine lends every run to read: the system's places, the Python installation and its import
    path as the process starts (before the submission can add to it), the tool, the CUDA installation."""
    import site

    from diagnose.runs.worker.state import SYSTEM
    env = os.environ
    dirs = [*SYSTEM, sys.prefix, sys.base_prefix, sys.exec_prefix, *spec.tool_paths, *sys.path,
            *(site.getsitepackages() if hasattr(site, "getsitepackages") else []),
            env.get("CUDA_HOME"), env.get("CUDA_PATH"), *env.get("LD_LIBRARY_PATH", "").split(os.pathsep),
            *env.get("PATH", "").split(os.pathsep)]
    return sorted({os.path.realpath(d) for d in dirs if d and os.path.isdir(d)})


def _fds() -> tuple[int, int, int, int | None]:
    raw = [int(x) for x in os.environ.pop(FDS_ENV, "").split(",")]
    return raw[0], raw[1], raw[2], (raw[3] if len(raw) > 3 else None)


def main(spec_path: str) -> int:
    become_subreaper()     # the submission's orphans stay this run's (see diagnose/runs/subreaper.py)
    with open(spec_path) as fh:
        spec = WorkerSpec.from_json(fh.read())
    ch, dog, lock, report_fd = _arm(spec)
    ctx = _setup(spec, ch, lock, report_fd)
    return ctx if isinstance(ctx, int) else _run(spec, ctx, ch, dog)


def _arm(spec: WorkerSpec):
    """Before anything of the submission's: the run's own /tmp, the event channel, the state and library
    watchers, the stack dumps, the watchdog, the GPU lock, and the clean-exit record (registered first, so it
    runs last)."""
    ev_fd, rep_fd, stacks_fd, report_fd = _fds()
    # The harness's process has no PYTHONPATH: the tool's own entries stay on sys.path (this process needs
    # them), and leave the environment that the submission and its processes see.
    if spec.tool_paths and os.environ.get("PYTHONPATH", "").split(os.pathsep) == list(spec.tool_paths):
        del os.environ["PYTHONPATH"]
    import site
    for path in spec.tool_paths[1:]:     # a --user site reaches this process by PYTHONPATH: its .pth files too
        site.addsitedir(path)
    # First, while this process has one thread: /tmp and /dev/shm become the run's own where they can.
    walls = _walls(spec)
    ch = Channel(ev_fd)
    ch.emit("container", **walls)
    from diagnose.runs.worker import plugins
    from diagnose.runs.worker.state import StateLog
    StateLog(ch, spec.root, walls, _lent(spec)).install()
    plugins.load(spec.hooks, ch, spec.submission, spec.hook_args)   # before the submission binds what they watch
    # SIGUSR1 from the parent dumps every thread's stack into the stacks file; so does a fatal signal.
    # faulthandler writes from its C handler, so this works even while a thread sleeps inside C code.
    stacks = os.fdopen(stacks_fd, "w")
    faulthandler.enable(file=stacks, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    dump_fd = os.environ.pop(DUMP_FD_ENV, "")
    dog = Watchdog(spec.budget_s, stacks, spec.root, int(dump_fd) if dump_fd.isdigit() else None)
    dog.start()
    dog.route_stack_signal()
    lock = GpuLock(ch, rep_fd if spec.gpu_lock else None, on_wait=dog.add_wait)
    pid = os.getpid()

    def clean_exit():
        if os.getpid() == pid:
            if "interpreter_exit" in ch.phases:
                ch.end("interpreter_exit", ok=True)
            _outliving(ch)
            ch.emit("exit_clean")
            dog.resume_parent()
    atexit.register(clean_exit)   # first registered, so it runs last
    ch.emit("worker_start", stage=spec.stage, dump_tid=dog.native_id)
    sys.path.insert(0, os.getcwd())
    return ch, dog, lock, report_fd


def _walls(spec: WorkerSpec) -> dict:
    """How this run is walled off: by its jail (runs/jail.py), which says so in the environment; or, where the
    kernel refused the jail's namespaces, by this process's own mount namespace where it can still have one."""
    made = unpack(os.environ.pop(WALLS_ENV, None))
    if isinstance(made, dict) and made.get("jail"):
        return {"namespace": made["jail"], **{k: v for k, v in made.items() if k != "jail"}, "jail": made["jail"]}
    walls = container.enter(spec.root, spec.shared) if spec.private_mounts else \
        {"namespace": None, "private": [], "kept": [], "why": "not asked for"}
    if isinstance(made, dict):      # the jail was refused: what that leaves missing, and why
        walls.update(jail=None, missing=list(made.get("missing") or []), why=walls.get("why") or made.get("why"))
    return walls


def _setup(spec: WorkerSpec, ch, lock, report_fd):
    """torch, the device, the instruments and the guard, the harness's argv, and the reference: the stage's
    context, or the worker's own exit code (3) when any of it fails."""
    pid = os.getpid()
    from diagnose.runs.worker import plugins
    from diagnose.runs.worker.ctx import Ctx
    from diagnose.runs.worker.instrument import Instruments  # noqa: E402 - after the guards are armed
    from diagnose.runs.worker.stages import load_reference

    torch = None
    try:
        ch.begin("torch_import")
        import torch
        ch.end("torch_import")
        ins = Instruments(ch, torch, spec.submission, lock, watch=spec.watch, sample=spec.sample)
        with ins.phase("device_init"):
            if ins.cuda:
                torch.cuda.init()
                torch.empty(1, device="cuda")
        ch.emit("env", **_environment(torch))
        plugins.torch_up(torch, ch)      # before the guard notes the clocks: a probe's watcher is one of them
        guard = Guard(ch)
        guard.watch_clocks(torch)
        ctx = Ctx(spec=spec, torch=torch, ins=ins, guard=guard, report_fd=report_fd)
        evaluator = spec.evaluated
        if spec.argv:        # the harness's argv, never the worker's own
            sys.argv, sys.orig_argv = list(spec.argv), ["python3", *spec.argv]
        if spec.stage != "compile" and not evaluator:
            with ins.phase("reference_import"):
                load_reference(ctx)
            guard.watch_module("reference")
    except BaseException as e:  # noqa: BLE001 - report, then exit with the worker's own code
        if os.getpid() != pid:
            raise
        frames = _frames(e.__traceback__)
        reason = needs_cuda(e, frames, torch)
        if reason:
            ch.emit("needs_gpu", reason=f"the problem's reference needs CUDA: {reason}")
        ch.emit("worker_error", type=type(e).__name__, message=str(e)[:2000],
                traceback=traceback.format_exc()[-8000:])
        return 3
    return ctx


def _run(spec: WorkerSpec, ctx, ch, dog) -> int:
    """The stage itself; then the stage's end as the harness's process ends it."""
    pid, torch, ins, guard, evaluator = os.getpid(), ctx.torch, ctx.ins, ctx.guard, spec.evaluated
    pooled = spec.stage != "compile" and not evaluator     # the built-in model's stage: its pool ends it
    from diagnose.runs.worker.stages import STAGE_FUNCS
    try:
        if evaluator:
            from diagnose.runs.worker.evaluator import stage_evaluator
            status = stage_evaluator(ctx)
        else:
            status = STAGE_FUNCS[spec.stage](ctx)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a submission too
        if os.getpid() != pid:    # a fork of the submission unwinding through our frames: not ours
            raise
        open_phase = ch.failed or ch.phase
        frames = _frames(e.__traceback__)
        reason = needs_cuda(e, frames, torch)
        if reason:
            ch.emit("needs_gpu", reason=reason)
        guard.verify("when the stage failed")
        # escapes: the evaluator's pool hands back only an Exception; anything else ends its worker
        ch.emit("exception", phase=open_phase, type=type(e).__name__, message=str(e)[:4000],
                traceback="".join(traceback.format_exception(e))[-20000:], frames=frames,
                escapes=not isinstance(e, Exception))
        if pooled:
            _terminated(ch, dog, 1)     # the exception reached the evaluator, which ends with the pool
        return 1
    from diagnose.runs.worker import plugins
    plugins.stage_end(spec.stage, ch)
    ins.stop()
    guard.verify("at the end of the stage")
    ch.emit("stage_done", status=status, t=time.time())
    if pooled:
        _terminated(ch, dog, 0)
    # `python3 submission.py`, and a problem's own `python3 eval.py`: the interpreter's own exit, which waits
    # for non-daemon threads and runs atexit handlers
    ch.begin("interpreter_exit")
    return 0
