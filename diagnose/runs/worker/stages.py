"""The harness stages as the child runs them: compile step, test, benchmark, leaderboard.

Each function gets a Ctx and returns the stage's status word: 'ok' or 'wrong'. Exceptions propagate to
main.py, which records them. Timing follows the GPU MODE method (harness.py has the rule itself).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types

from diagnose.runs import harness
from diagnose.runs.worker import imports, outputs, plugins
from diagnose.runs.worker.ctx import Ctx
from diagnose.runs.worker.timing import bench_cases, time_case
from diagnose.tasks.loader import labels


def _code(path: str, ctx: Ctx | None):
    """Compile a file ourselves, so the edited lines of a variant can be watched before it runs."""
    with open(path, "rb") as fh:
        raw = fh.read()
    code = compile(raw, path, "exec", dont_inherit=True)
    if ctx is not None:
        ctx.ins.instrument(code, raw.decode("utf-8", "replace"))
    return code


def import_module_from(path: str, name: str, ctx: Ctx | None = None):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    exec(_code(path, ctx), mod.__dict__)
    imports.ran(name, mod)      # loaded from its file, never imported: the probes' patches of it, as after an import
    return mod


def run_as_main(path: str, ctx: Ctx) -> None:
    """`python3 submission.py`: the file runs as the __main__ module, as the harness's compile step runs it
    (sys.argv is already the harness's: WorkerSpec.argv)."""
    mod = types.ModuleType("__main__")
    mod.__dict__.update(__file__=path, __builtins__=__builtins__, __cached__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = mod
    try:
        exec(_code(path, ctx), mod.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def load_reference(ctx: Ctx) -> None:
    ctx.reference = import_module_from(os.path.join(os.getcwd(), "reference.py"), "reference")
    ctx.generate = ctx.reference.generate_input
    ctx.check = ctx.reference.check_implementation


def import_submission(ctx: Ctx) -> None:
    with ctx.ins.phase("submission_import"):
        mod = import_module_from(ctx.spec.submission, "submission", ctx)
    ctx.guard.verify("after the submission's import")
    ctx.kernel = mod.custom_kernel


def clone(data):
    t = type(data)
    if isinstance(data, tuple) and hasattr(data, "_fields"):   # a namedtuple takes its fields as arguments
        return t(*(clone(x) for x in data))
    if isinstance(data, (tuple, list)):
        return t(clone(x) for x in data)
    if isinstance(data, dict):
        return {k: clone(v) for k, v in data.items()}
    return data.clone() if hasattr(data, "clone") else data


def verdict_of(res) -> tuple[bool, str]:
    """A check's answer, in either convention: (ok, message), or a string that is '' on a pass (older
    GPU MODE checkers)."""
    if isinstance(res, str):
        return res == "", res
    if isinstance(res, (tuple, list)) and len(res) == 2:
        return bool(res[0]), str(res[1])
    return bool(res), ""


def _check(ctx: Ctx, label: str, data, out, index: int = 0) -> bool:
    try:
        ok, msg = verdict_of(ctx.check(data, out))
    except Exception as e:  # noqa: BLE001 - the check choking on the output means the output is wrong
        ok, msg = False, f"check raised {type(e).__name__}: {e}"
    if not ok:
        ctx.ch.emit("check", case=label, ok=False, index=index, message=str(msg)[:2000])
        plugins.wrong(ctx.check, data, out, label, ctx.ch)
    return bool(ok)


# -- stages ------------------------------------------------------------------------------------------

def stage_compile(ctx: Ctx) -> str:
    """`python3 submission.py`: the module runs as __main__, as the harness's compile step does; its
    `if __name__ == "__main__":` block too, which no stage ever runs. The phase is `script`, not an import."""
    with ctx.ins.phase("script"):
        try:
            run_as_main(ctx.spec.submission, ctx)
        except SystemExit as e:
            if e.code not in (None, 0):   # a script may end itself with sys.exit(0): the step still passes
                raise
    ctx.guard.verify("after the submission ran as a script")
    return "ok"


def stage_test(ctx: Ctx) -> str:
    import_submission(ctx)
    cases = ctx.spec.task["tests"]
    for label, case in zip(labels(cases), cases, strict=True):
        with ctx.ins.phase(f"generate:{label}"):
            data = ctx.generate(**case)
        with ctx.ins.phase(f"first_call:{label}", case=label):
            out = ctx.kernel(clone(data))
        with ctx.ins.phase(f"check:{label}"):
            outputs.keep(ctx.spec.outputs, label, 0, case, out, data)   # before the check, which may mend it
            if not _check(ctx, label, data, out):
                return "wrong"
    return "ok"


def _inputs(ctx: Ctx, case: dict) -> list:
    return [ctx.generate(**harness.input_kwargs(case, i)) for i in range(harness.INPUTS_PER_CASE)]


def _run_and_check_all(ctx: Ctx, label: str, case: dict, inputs: list, first_phase: str | None) -> bool:
    """Run every input once and keep all outputs before checking any, as the harness does: a kernel
    that returns one static buffer returns aliases of it, and the check sees that. The first and the last
    output leave the process for the verifier, before any check runs."""
    outs = []
    if first_phase:
        with ctx.ins.phase(first_phase, case=label):
            outs.append(ctx.kernel(clone(inputs[0])))
    with ctx.ins.phase(f"check:{label}"):
        for data in inputs[len(outs):]:
            outs.append(ctx.kernel(clone(data)))
        if ctx.ins.cuda:
            ctx.torch.cuda.synchronize()
        for i in harness.KEPT:
            outputs.keep(ctx.spec.outputs, label, i, harness.input_kwargs(case, i), outs[i], inputs[i])
        for i, (data, out) in enumerate(zip(inputs, outs, strict=True)):
            if not _check(ctx, label, data, out, i):
                return False
    return True


def stage_benchmark(ctx: Ctx) -> str:
    """One warm-up benchmark (the first case, one call), then every case: 50 inputs run and checked,
    then timed. A shape's first call in this process is its `first_call:` phase wherever it happens."""
    import_submission(ctx)
    cases = bench_cases(ctx)
    first_label, first_case = cases[0]
    with ctx.ins.phase("warmup_benchmark"), ctx.ins.phase(f"first_call:{first_label}", case=first_label):
        ctx.kernel(ctx.generate(**first_case))
    for label, case in cases:
        with ctx.ins.phase(f"inputs:{label}"):
            inputs = _inputs(ctx, case)
        first = None if label == first_label else f"first_call:{label}"
        if not _run_and_check_all(ctx, label, case, inputs, first_phase=first):
            return "wrong"
        time_case(ctx, label, inputs)
    return "ok"


def stage_leaderboard(ctx: Ctx) -> str:
    import_submission(ctx)
    cases = bench_cases(ctx)
    for label, case in cases:
        with ctx.ins.phase(f"first_call:{label}", case=label):
            ctx.kernel(ctx.generate(**case))
    for label, case in cases:
        with ctx.ins.phase(f"inputs:{label}"):
            inputs = _inputs(ctx, case)
        time_case(ctx, label, inputs)
        # The leaderboard re-checks after timing and stops at the first failure.
        if not _run_and_check_all(ctx, label, case, inputs, first_phase=None):
            return "wrong"
    return "ok"


def stage_reference(ctx: Ctx) -> str:
    """Can this machine judge the problem at all? The reference alone, on the first test case: its input,
    its own answer, and its own check of that answer. Runs before any harness stage."""
    case = ctx.spec.task["tests"][0]
    label = labels([case])[0]
    with ctx.ins.phase(f"generate:{label}"):
        data = ctx.generate(**case)
    ref = getattr(ctx.reference, "ref_kernel", None)
    if ref is None:
        return "ok"       # nothing to run the check against: generating the input is the evidence
    with ctx.ins.phase(f"reference:{label}"):
        out = ref(clone(data))
    with ctx.ins.phase(f"check:{label}"):
        ok, msg = verdict_of(ctx.check(data, out))
    if not ok:
        raise RuntimeError(f"the reference's own output fails its own check on this machine: {msg[:300]}")
    return "ok"


def stage_tune(ctx: Ctx) -> str:
    """A tuning run, outside any budget: each distinct case of the task's tests and benchmarks once, so that
    every search the submission runs at a new shape (Helion's autotuner, one written by hand) runs to its
    end (what each kept, the probes' own hooks report at the stage's end)."""
    import_submission(ctx)
    cases, seen = ctx.spec.task["tests"] + ctx.spec.task.get("benchmarks", []), []
    for label, case in zip(labels(cases), cases, strict=True):
        shape = {k: v for k, v in case.items() if k != "seed"}
        if shape in seen:
            continue
        seen.append(shape)
        with ctx.ins.phase(f"tune:{label}", case=label):
            ctx.kernel(ctx.generate(**case))
            if ctx.ins.cuda:
                ctx.torch.cuda.synchronize()
    return "ok"


STAGE_FUNCS = {"compile": stage_compile, "tune": stage_tune, "test": stage_test, "benchmark": stage_benchmark,
               "leaderboard": stage_leaderboard, "reference": stage_reference}
