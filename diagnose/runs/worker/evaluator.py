"""Run a problem's own evaluator (its eval.py) as the harness does, under the worker's instruments.

The harness runs `python eval.py MODE cases.txt` with POPCORN_FD naming a descriptor for the evaluator's
report ("check: pass", "test.0.error: ...", "benchmark.0.mean: ..."). The worker does the same in its own
process: it writes the cases file, hands the evaluator the report descriptor the parent gave it, and
runs eval.py as __main__. Many evaluators run the submission in a spawned multiprocessing pool: every
process spawned from here starts with diagnose.runs.worker.bootstrap, which sets the same instruments up
there, on descriptors passed along explicitly. The evaluator, not the worker, decides stages, inputs,
repeats, flush, seeds and how a check's answer reads (a tuple, or a string that is '' on a pass); the
parent reads its report.
"""
from __future__ import annotations

import json
import multiprocessing.spawn
import multiprocessing.util
import os
import sys
import types

from diagnose.runs.protocol import CHILD_ENV
from diagnose.runs.worker.hooks import Hooks
from diagnose.tasks.loader import stage_cases


def _spawn_with_bootstrap(ctx, fds: list[int]) -> None:
    """Children spawned by multiprocessing run diagnose.runs.worker.bootstrap first, and inherit our
    descriptors (spawn closes every other one)."""
    orig_cmd, orig_spawn = multiprocessing.spawn.get_command_line, multiprocessing.util.spawnv_passfds

    # the tool's own import path reaches the child on its command line, never in its environment
    first = f"import sys; sys.path[:0] = {list(ctx.spec.tool_paths)!r}; import diagnose.runs.worker.bootstrap; "

    def get_command_line(**kwds):
        cmd = orig_cmd(**kwds)
        return [c.replace("from multiprocessing.spawn import spawn_main",
                          first + "from multiprocessing.spawn import spawn_main", 1)
                if isinstance(c, str) else c for c in cmd]

    def spawnv_passfds(path, args, passfds):
        return orig_spawn(path, args, sorted(set(passfds) | set(fds)))
    multiprocessing.spawn.get_command_line = get_command_line
    multiprocessing.util.spawnv_passfds = spawnv_passfds


def _run_as_main(path: str) -> None:
    """Run eval.py as `python eval.py` would: as __main__, and as __mp_main__ too. multiprocessing aliased
    __mp_main__ to the worker's own main module when it was imported; a pool worker pickles the
    evaluator's classes (its Stats) under that name, and the parent could not unpickle them: the pool's
    result thread dies and `pool.apply` waits forever, a hang the real harness never has."""
    mod = types.ModuleType("__main__")
    mod.__file__, mod.__builtins__ = path, __builtins__
    saved = sys.modules["__main__"], sys.modules.get("__mp_main__")
    sys.modules["__main__"] = sys.modules["__mp_main__"] = mod
    try:
        with open(path, "rb") as fh:
            code = compile(fh.read(), path, "exec")
        exec(code, mod.__dict__)
    finally:
        sys.modules["__main__"] = saved[0]
        if saved[1] is not None:
            sys.modules["__mp_main__"] = saved[1]


def stage_evaluator(ctx) -> str:
    spec = ctx.spec
    task = spec.task
    ev_fd, popcorn_fd = ctx.ch._fd, ctx.report_fd
    os.set_inheritable(popcorn_fd, True)
    os.environ["POPCORN_FD"] = str(popcorn_fd)
    for fd in (ev_fd,):
        os.set_inheritable(fd, True)
    # where every process that checks keeps what it checked, for the verifier, and the cases it must keep
    keep = {"dir": spec.outputs, "cases": stage_cases(task, spec.stage)}
    os.environ[CHILD_ENV] = json.dumps({"events_fd": ev_fd, "stacks": spec.stacks_prefix, "stage": spec.stage,
                                        "submission": spec.submission, "sample": spec.sample, "watch": spec.watch,
                                        "hooks": spec.hooks, "hook_args": spec.hook_args, "keep": keep})
    _spawn_with_bootstrap(ctx, [ev_fd])
    hooks = Hooks(ctx.ins, ctx.guard, keep)
    hooks.install()
    ctx.judges = hooks.judges
    entry = os.path.join(os.getcwd(), task["evaluator"])     # sys.argv is the harness's already (main.py)
    code = 0
    try:
        _run_as_main(entry)
    except SystemExit as e:
        code = e.code
    ctx.ch.emit("evaluator_exit", code=code if isinstance(code, int) or code is None else str(code))
    if code not in (0, None, 112):
        raise RuntimeError(f"the problem's evaluator exited with {code!r}")
    return "ok"
