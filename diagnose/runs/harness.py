"""The GPU MODE harness as a model: stages, budgets and the benchmark stopping rule.

Pure Python, imported by both sides: the worker applies the stopping rule for real (`--full`), the parent
uses it to predict how long a stage would take from a short timing sample (the default depth).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

STAGES = ("compile", "test", "benchmark", "leaderboard")   # what --stages names: "compile" is the step below
JUDGED = ("test", "benchmark", "leaderboard")              # the stages whose ending the harness judges
# Before each stage the harness runs `python3 submission.py` (the "compile" step, 120 s) in the same
# container and ignores how it ends: it exists to pre-build load_inline extensions for the stage.
COMPILE_STEP_LIMIT_S = 120.0
# A tuning run is no harness stage: its search runs once, outside any budget, for its result. This limit only
# keeps a search that never ends from holding the diagnosis forever.
TUNING_LIMIT_S = 1200.0
DEFAULT_BUDGET_S = 180.0          # test, benchmark, leaderboard
# check's margin rule: a stage's time, raised by its measured spread and by this allowance for a slower or busier
# runner than this machine (none is measured here), must stay within its budget; under half of it is a wide margin
RUNNER_ALLOWANCE = 0.2
WIDE_MARGIN = 0.5
# check without a GPU: no time decides anything there (a CPU runs a GPU kernel many times slower), so each stage
# runs to its checks, up to this cap (or its budget, where that is longer) instead of the GPU's budget
CPU_CHECK_CAP_S = 300.0

# The built-in model's evaluator (eval_better_bench.py) imports torch and the reference itself, then runs each case
# in its spawned multiprocessing.Pool worker: the submission's import, the input, the call and the check. The pool
# hands back a task's Exception; a worker that dies instead (SystemExit, KeyboardInterrupt, os._exit, a signal)
# leaves its task unanswered, and `pool.apply` waits for it until the stage's timeout.
EVALUATOR_PHASES = ("torch_import", "device_init", "reference_import")


def in_pool_worker(stage: str, phase: str | None, evaluated: bool) -> bool:
    """Whether the built-in model runs this phase of a stage in the evaluator's pool worker. A problem's own
    eval.py runs for real, and its pool (if it has one) does what it does."""
    return not evaluated and stage in JUDGED and bool(phase) and phase.split(":")[0] not in EVALUATOR_PHASES


def lost_task(how: str, phase: str, budget_s: float) -> str:
    """The message of a stage whose pool worker died: the timeout the harness would report, and why."""
    return (f"{how} ended the evaluator's pool worker in {phase}: multiprocessing.Pool never answers a task whose "
            f"worker died, so the harness's stage waits until its {budget_s:g} s timeout")


INPUTS_PER_CASE = 50              # inputs generated per benchmark case (seed + 42 * i)
# Of a benchmark case's 50 checked outputs, those that leave the submission's process for the verifier (the test
# stage keeps its one output per case): the first and the last, which a static buffer or a kernel that goes wrong
# after its first calls would show
KEPT = (0, INPUTS_PER_CASE - 1)
CALLS_PER_REPEAT = 50             # CUDA events around 50 back-to-back calls
REL_ERROR_TARGET = 0.001          # stop when std / sqrt(n) / mean < this
REPEAT_CAP = 1000
CASE_WALL_CAP_S = 120.0
MIN_REPEATS = 2                   # the rule is first checked after the 2nd repeat ...
MIN_WALL_S = 0.1                  # ... once 100 ms of wall time have passed
L2_FLUSH_BYTES = 16000 * 1024 * 1024 * 4   # the harness's fp32 flush tensor: about 64 GiB


def stage_budgets(budget: float | None, task_timeouts: dict, compile_budget: float | None = None) -> dict[str, float]:
    """Per-stage deadlines. An explicit --budget wins; then task.yml; then the harness default.

    The compile step has its own limit, as in the harness: 120 s, or --compile-budget; --budget and a
    task's timeouts never change it.
    """
    out = {"compile": compile_budget or COMPILE_STEP_LIMIT_S, "tune": TUNING_LIMIT_S}
    for stage in JUDGED:
        out[stage] = budget or task_timeouts.get(stage, DEFAULT_BUDGET_S)
    return out


def should_stop(per_call_s: list[float], case_wall_s: float) -> str | None:
    """The harness's stopping rule after a repeat; returns why it stops, or None to go on."""
    n = len(per_call_s)
    if n >= REPEAT_CAP:
        return "repeat cap"
    if case_wall_s > CASE_WALL_CAP_S:
        return "case wall cap"
    if n >= MIN_REPEATS and case_wall_s > MIN_WALL_S:
        mean = statistics.fmean(per_call_s)
        if mean > 0 and statistics.stdev(per_call_s) / math.sqrt(n) / mean < REL_ERROR_TARGET:
            return "relative error"
    return None


@dataclass(frozen=True)
class Prediction:
    repeats: int
    seconds: float        # predicted wall time of the timing loop for one case
    reason: str           # which stopping condition ends it
    cv: float             # coefficient of variation of the sample
    low_s: float = 0.0    # the seconds again at the ends of a 95 % interval for the sample's cv
    high_s: float = 0.0


def _chi2(k: int, z: float) -> float:
    """A quantile of the chi-square distribution with k degrees of freedom (Wilson-Hilferty)."""
    return k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3


def _seconds_for(cv: float, wall: float) -> tuple[int, float, str]:
    need = max(MIN_REPEATS, math.ceil((cv / REL_ERROR_TARGET) ** 2), math.ceil(MIN_WALL_S / wall) if wall else 0)
    reason = "relative error"
    if need >= REPEAT_CAP:
        need, reason = REPEAT_CAP, "repeat cap"
    seconds = need * wall
    if seconds > CASE_WALL_CAP_S:
        need, seconds, reason = max(1, int(CASE_WALL_CAP_S / wall)), CASE_WALL_CAP_S, "case wall cap"
    return need, seconds, reason


def predict_case(per_call_s: list[float], repeat_wall_s: list[float]) -> Prediction:
    """How many repeats, and how many seconds, the full stopping rule would take for one case.

    The rule stops at the first n with cv / sqrt(n) < 0.001, i.e. n = (cv / 0.001)^2: a kernel whose
    time varies by more than about 3 % never gets there and runs to the repeat cap. The cv of a short
    sample is itself uncertain; the prediction carries the seconds at both ends of its 95 % interval.
    """
    n0 = len(per_call_s)
    if n0 < 2:
        raise ValueError("a prediction needs at least two timed repeats")
    mean = statistics.fmean(per_call_s)
    cv = statistics.stdev(per_call_s) / mean if mean > 0 else 0.0
    wall = statistics.fmean(repeat_wall_s)
    need, seconds, reason = _seconds_for(cv, wall)
    k = n0 - 1
    lo = _seconds_for(cv * math.sqrt(k / max(_chi2(k, 1.96), 1e-9)), wall)[1]
    hi = _seconds_for(cv * math.sqrt(k / max(_chi2(k, -1.96), 1e-9)), wall)[1]
    return Prediction(repeats=need, seconds=seconds, reason=reason, cv=cv, low_s=lo, high_s=hi)


def input_kwargs(case: dict, i: int) -> dict:
    """generate_input's arguments for a benchmark case's i-th input: its seed + 42 * i (a case without a seed: the
    case itself, every time)."""
    return {**case, "seed": case["seed"] + 42 * i} if "seed" in case else dict(case)
