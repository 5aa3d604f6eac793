"""First thing in every process a problem's evaluator spawns (its multiprocessing pool workers): set up
the same instruments as the worker (phases, compile records, the probes' hooks, the sampler, a stack dump on
SIGUSR1 into a file of its own) on the descriptors the worker passed along. Does nothing in a process
started without them.
"""
import json
import os

_cfg = json.loads(os.environ.get("DIAGNOSE_CHILD") or "null")   # protocol.CHILD_ENV (this file imports nothing of ours)
if _cfg:
    import faulthandler
    import signal

    from diagnose.runs.worker.channel import Channel
    from diagnose.runs.worker.gpu_lock import GpuLock

    _ch = Channel(_cfg["events_fd"])
    _stacks = open(f"{_cfg['stacks']}.{os.getpid()}", "w")  # noqa: SIM115 - open for the process's lifetime
    faulthandler.enable(file=_stacks, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
    # spawned from a thread that blocks SIGUSR1 (the worker routes it to its watchdog): this process
    # inherited that mask, and must take the signal itself
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    _ch.emit("worker_start", stage=_cfg["stage"], child=True)
    from diagnose.runs.worker import plugins as _plugins
    _plugins.load(_cfg.get("hooks") or [], _ch, _cfg["submission"], _cfg.get("hook_args"))

    import torch

    from diagnose.runs.worker.guard import Guard
    from diagnose.runs.worker.hooks import Hooks
    from diagnose.runs.worker.instrument import Instruments

    _ins = Instruments(_ch, torch, _cfg["submission"], GpuLock(_ch, None), watch=_cfg.get("watch") or [],
                       sample=_cfg.get("sample", True))
    _plugins.torch_up(torch, _ch)
    _guard = Guard(_ch)
    _guard.watch_clocks(torch)
    Hooks(_ins, _guard, _cfg.get("keep")).install()
